package fleet

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/samber/lo"

	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/kvstate"
)

// StatusRow is a row of `processor status -json`: the provider's state and,
// when running processors define its name differently, each definition
// with the processors that run it.
type StatusRow struct {
	kvstate.ProviderStatus
	Conflict []Held `json:"conflict,omitempty"`
}

// WithConflicts joins the conflicts to the rows of their providers; a
// conflict about a provider without a row gets one of its own.
func WithConflicts(rows []kvstate.ProviderStatus, conflicts []Conflict) []StatusRow {
	byName := lo.SliceToMap(conflicts, func(c Conflict) (string, []Held) { return c.Provider, c.Definitions })
	out := make([]StatusRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, StatusRow{ProviderStatus: r, Conflict: byName[r.Provider]})
		delete(byName, r.Provider)
	}
	for _, c := range conflicts {
		if held, ok := byName[c.Provider]; ok {
			out = append(out, StatusRow{ProviderStatus: kvstate.ProviderStatus{Provider: c.Provider}, Conflict: held})
		}
	}
	return out
}

// WithCircuits returns conflicts with each definition's circuit set
// (kvstate.Circuit), where holder is kvstate.Store.Holder. The definitions
// of a name that none holds yet, which has no state, get no circuit.
func WithCircuits(conflicts []Conflict, holder func(provider string) (kvstate.Holder, bool)) []Conflict {
	out := make([]Conflict, len(conflicts))
	for i, c := range conflicts {
		out[i] = Conflict{Provider: c.Provider, Definitions: slices.Clone(c.Definitions)}
		h, held := holder(c.Provider)
		if !held {
			continue
		}
		for j := range out[i].Definitions {
			d := &out[i].Definitions[j]
			d.Circuit = kvstate.Circuit(c.Provider, d.Fingerprint, h, held)
		}
	}
	return out
}

// WriteConflicts prints, after the table, each provider name that running
// processors define differently, each definition with its processors and
// circuit, then each chain name that they run with different providers.
func WriteConflicts(w io.Writer, conflicts []Conflict, chains []ChainConflict) error {
	var b strings.Builder
	for _, c := range conflicts {
		fmt.Fprintf(&b, "\nCONFLICT: provider %s is defined differently by running processors:\n", text.Visible(c.Provider))
		for _, h := range c.Definitions {
			circuit := ""
			if h.Circuit != "" {
				circuit = "  circuit " + text.Visible(h.Circuit)
			}
			fmt.Fprintf(&b, "  %s  on %v%s\n", text.Visible(h.Definition.String()), visible(h.Processors), circuit)
		}
	}
	for _, c := range chains {
		fmt.Fprintf(&b, "\nCONFLICT: chain %s has different providers on running processors (its requests go to either):\n", text.Visible(c.Chain))
		for _, l := range c.Lists {
			fmt.Fprintf(&b, "  [%s]  on %v\n", text.Visible(strings.Join(l.Providers, " ")), visible(l.Processors))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// visible is ss each through text.Visible: what the records hold reaches
// the terminal, and anyone who can write the bucket can write a record.
func visible(ss []string) []string {
	return lo.Map(ss, func(s string, _ int) string { return text.Visible(s) })
}
