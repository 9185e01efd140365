package main

import (
	"fmt"
	"io"
	"time"

	"github.com/detourhq/detour/internal/fleet"
	"github.com/detourhq/detour/kvstate"
)

// fleetReplies is how long status waits for running processors to say
// what they run.
const fleetReplies = 500 * time.Millisecond

// statusRow is a row of `processor status -json`: the provider's state and,
// when running processors define its name differently, each definition
// with the processors that run it.
type statusRow struct {
	kvstate.ProviderStatus
	Conflict []fleet.Held `json:"conflict,omitempty"`
}

// withConflicts joins the conflicts to the rows of their providers; a
// conflict about a provider without a row gets one of its own.
func withConflicts(rows []kvstate.ProviderStatus, conflicts []fleet.Conflict) []statusRow {
	byName := map[string][]fleet.Held{}
	for _, c := range conflicts {
		byName[c.Provider] = c.Definitions
	}
	out := make([]statusRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, statusRow{ProviderStatus: r, Conflict: byName[r.Provider]})
		delete(byName, r.Provider)
	}
	for _, c := range conflicts {
		if held, ok := byName[c.Provider]; ok {
			out = append(out, statusRow{ProviderStatus: kvstate.ProviderStatus{Provider: c.Provider}, Conflict: held})
		}
	}
	return out
}

// writeConflicts prints, after the table, each provider name that running
// processors define differently.
func writeConflicts(w io.Writer, conflicts []fleet.Conflict) error {
	for _, c := range conflicts {
		if _, err := fmt.Fprintf(w, "\nCONFLICT: provider %s is defined differently by running processors:\n", c.Provider); err != nil {
			return err
		}
		for _, h := range c.Definitions {
			if _, err := fmt.Fprintf(w, "  %s  on %v\n", h.Definition, h.Processors); err != nil {
				return err
			}
		}
	}
	return nil
}
