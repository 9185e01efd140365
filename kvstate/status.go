package kvstate

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/samber/lo"

	"github.com/detourhq/detour/internal/text"
)

// ProviderStatus is one row of `processor status`.
type ProviderStatus struct {
	Provider            string       `json:"provider"`
	State               CircuitState `json:"state"`
	ConsecutiveFailures int          `json:"consecutive_failures"`
	CooldownUntil       time.Time    `json:"cooldown_until,omitzero"`
	Trips               int          `json:"trips"`
	LastClass           string       `json:"last_class,omitempty"`
	LastError           string       `json:"last_error,omitempty"`
	LastFailure         time.Time    `json:"last_failure,omitzero"`
	LastSuccess         time.Time    `json:"last_success,omitzero"`
	// Cooldown is the provider's cooldown key as the mirror holds it, nil
	// when there is none or the last reset ended it; the key may outlive
	// CooldownUntil by about a second, until the server removes it.
	Cooldown *Cooldown `json:"cooldown,omitempty"`
	// ResetAt and ResetBy are the operator's last reset (processor reset).
	ResetAt time.Time `json:"reset_at,omitzero"`
	ResetBy string    `json:"reset_by,omitempty"`
}

// MarshalText writes the circuit state by name.
func (s CircuitState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a circuit state by name, so that status -json can be
// read back.
func (s *CircuitState) UnmarshalText(b []byte) error {
	i := slices.Index(stateNames, string(b))
	if i < 0 {
		return fmt.Errorf("kvstate: unknown circuit state %q", b)
	}
	*s = CircuitState(i)
	return nil
}

// Status returns a row for every circuit the mirror knows and every one of
// known (the chain file's providers), sorted by provider name, each
// provider's plain circuit first.
func (s *Store) Status(now time.Time, known ...string) []ProviderStatus {
	s.mu.RLock()
	names := slices.Concat(known, slices.Collect(maps.Keys(s.m.health)), slices.Collect(maps.Keys(s.m.cooldowns)))
	s.mu.RUnlock()
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(strings.Compare(CircuitProvider(a), CircuitProvider(b)), strings.Compare(a, b))
	})
	return lo.Map(slices.Compact(names), func(p string, _ int) ProviderStatus { return s.row(p, now) })
}

// row is provider's status at now, from the mirror.
func (s *Store) row(provider string, now time.Time) ProviderStatus {
	h, c := s.view(provider)
	return statusOf(provider, h, c, now)
}

// statusOf is provider's row at now from its health and its running
// cooldown key (nil: none).
func statusOf(provider string, h Health, c *Cooldown, now time.Time) ProviderStatus {
	row := ProviderStatus{Provider: provider, Cooldown: c,
		ConsecutiveFailures: h.ConsecutiveFailures, Trips: h.Trips, LastClass: h.LastClass.String(), LastError: h.LastError,
		LastFailure: h.LastFailure, LastSuccess: h.LastSuccess, ResetAt: h.ResetAt, ResetBy: h.ResetBy}
	if until := coolingUntil(h, c); now.Before(until) {
		row.State, row.CooldownUntil = StateOpen, until
	} else if halfOpen(h) {
		row.State = StateHalfOpen
	}
	return row
}

// WriteStatus prints rows as the table of `processor status`.
func WriteStatus(w io.Writer, rows []ProviderStatus) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no provider state recorded: every provider is closed")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSTATE\tFAILURES\tCOOLDOWN UNTIL\tTRIPS\tLAST ERROR")
	for _, r := range rows {
		until := "-"
		if !r.CooldownUntil.IsZero() {
			until = r.CooldownUntil.UTC().Format(time.RFC3339)
		}
		// Written by anyone who may write the bucket, and by a provider:
		// no control reaches the terminal.
		lastError := cmp.Or(text.Visible(r.LastError), "-")
		if len([]rune(lastError)) > 80 {
			lastError = string([]rune(lastError)[:79]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", text.Visible(r.Provider), r.State, r.ConsecutiveFailures, until, r.Trips, lastError)
	}
	for _, r := range rows { // under the table: lines without a cell
		if note := r.OperatorNote(); note != "" {
			fmt.Fprintln(tw, text.Visible(r.Provider+": "+note))
		}
	}
	return tw.Flush()
}

// OperatorNote tells an operator's act on the provider, for the status
// table and page: their cooldown while it runs ("tripped by operator
// alice@host until …: maintenance"), or their last reset while nothing has
// failed since ("reset by operator alice@host at …"); "" when neither.
func (r ProviderStatus) OperatorNote() string {
	if c := r.Cooldown; c != nil && c.Operator && !r.CooldownUntil.IsZero() {
		return fmt.Sprintf("tripped by operator %s until %s: %s", c.By, c.Until.UTC().Format(time.RFC3339), c.Reason)
	}
	if !r.ResetAt.IsZero() && r.State == StateClosed && !r.LastFailure.After(r.ResetAt) {
		return fmt.Sprintf("reset by operator %s at %s", r.ResetBy, r.ResetAt.UTC().Format(time.RFC3339))
	}
	return ""
}
