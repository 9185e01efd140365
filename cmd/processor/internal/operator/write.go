package operator

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/kvstate"
)

// WriteReset prints one line per reset result: what the provider was, and
// that every processor now calls it, or why there was nothing to reset.
func WriteReset(w io.Writer, results []ResetResult) error {
	for _, r := range results {
		var line string
		switch {
		case r.NoBucket:
			line = fmt.Sprintf("%s: nothing to reset: bucket %s does not exist yet (no processor has started on this NATS)", r.Provider, kvstate.Bucket)
		case !r.Done:
			line = fmt.Sprintf("%s: nothing to reset: %s, no cooldown, failures or trips recorded", r.Provider, r.Before.State)
		default:
			line = fmt.Sprintf("%s: reset: was %s; now closed for every processor", r.Provider, describe(r.Before))
		}
		// Names and reasons come from the bucket: no control reaches the
		// terminal.
		if _, err := fmt.Fprintln(w, text.Visible(line)); err != nil {
			return err
		}
	}
	return nil
}

// WriteTrip prints the line of a trip: the cooldown opened and what
// follows it, or the longer one left running; then one line for each of
// r.Others.
func WriteTrip(w io.Writer, r TripResult) error {
	for _, r := range append([]TripResult{r}, r.Others...) {
		if _, err := fmt.Fprintln(w, text.Visible(tripLine(r))); err != nil {
			return err
		}
	}
	return nil
}

func tripLine(r TripResult) string {
	if !r.Opened {
		return fmt.Sprintf("%s: already cooling until %s%s, no sooner than the %s asked: left as it is (processor reset %s ends it)",
			r.Provider, stamp(r.Until), cooldownBy(r.Cooldown), r.For, r.Provider)
	}
	after := "then sends it one request as a probe (half-open)"
	if !r.HalfOpen {
		after = "then calls it again (its failure_threshold is 0: it has no circuit of its own)"
	}
	return fmt.Sprintf("%s: tripped by %s for %s, until %s: %s; every processor skips it until then, %s",
		r.Provider, r.Cooldown.By, r.For, stamp(r.Until), r.Reason, after)
}

// describe is a provider's state for a reset's line: "open until … (auth
// cooldown by …), 1 failures, 1 trips".
func describe(r kvstate.ProviderStatus) string {
	var b strings.Builder
	b.WriteString(r.State.String())
	if !r.CooldownUntil.IsZero() {
		fmt.Fprintf(&b, " until %s%s", stamp(r.CooldownUntil), cooldownBy(r.Cooldown))
	}
	fmt.Fprintf(&b, ", %d failures, %d trips", r.ConsecutiveFailures, r.Trips)
	return b.String()
}

// cooldownBy says whose cooldown c is: " (auth cooldown by host-1-ab)",
// " (tripped by operator alice@host: maintenance)", or "" for none.
func cooldownBy(c *kvstate.Cooldown) string {
	switch {
	case c == nil:
		return ""
	case c.Operator:
		return fmt.Sprintf(" (tripped by operator %s: %s)", c.By, c.Reason)
	}
	return fmt.Sprintf(" (%s cooldown by %s)", c.Class, c.By)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
