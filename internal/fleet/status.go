package fleet

import (
	"fmt"
	"io"

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
	byName := map[string][]Held{}
	for _, c := range conflicts {
		byName[c.Provider] = c.Definitions
	}
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

// WriteConflicts prints, after the table, each provider name that running
// processors define differently.
func WriteConflicts(w io.Writer, conflicts []Conflict) error {
	// Any client can answer discovery: what the announcements hold reaches
	// the terminal through text.Visible.
	for _, c := range conflicts {
		if _, err := fmt.Fprintf(w, "\nCONFLICT: provider %s is defined differently by running processors:\n", text.Visible(c.Provider)); err != nil {
			return err
		}
		for _, h := range c.Definitions {
			processors := make([]string, len(h.Processors))
			for i, p := range h.Processors {
				processors[i] = text.Visible(p)
			}
			if _, err := fmt.Fprintf(w, "  %s  on %v\n", text.Visible(h.Definition.String()), processors); err != nil {
				return err
			}
		}
	}
	return nil
}
