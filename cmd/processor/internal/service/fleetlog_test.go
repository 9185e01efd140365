package service

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
)

// forgedConflict is a conflict over primary between this processor's
// definition and n forged ones that differ in each round, each held by
// five processors.
func forgedConflict(self fleet.Held, round, n int) fleet.Conflict {
	c := fleet.Conflict{Provider: "primary", Definitions: []fleet.Held{self}}
	for i := range n {
		d := fleet.Definition{Fingerprint: fmt.Sprintf("%08x%08x", round, i), Type: "openai",
			BaseURL: "http://forged.example/" + strings.Repeat("v", 40), Model: fmt.Sprintf("m-%d", round), Policy: strings.Repeat("p", 150)}
		var procs []string
		for j := range 5 {
			procs = append(procs, fmt.Sprintf("forger-%d-%d", i, j))
		}
		c.Definitions = append(c.Definitions, fleet.Held{Definition: d, Processors: procs})
	}
	return c
}

// TestFleetLogBoundsLinesAndMemory: however many definitions a conflict
// holds, its log line names a few and how many more there are; what the
// log remembers stays one entry per provider name in conflict, and none
// once the conflicts end, though the records change every round.
func TestFleetLogBoundsLinesAndMemory(t *testing.T) {
	self := fleet.Held{Definition: fleet.Definition{Fingerprint: "ffffffffffffffff", Type: "openai", Policy: "mine"}, Processors: []string{"me"}}
	var buf bytes.Buffer
	l := newFleetLog(fleet.Instance{Processor: "me", Providers: map[string]fleet.Definition{"primary": self.Definition}},
		slog.New(slog.NewTextHandler(&buf, nil)))
	const forged, rounds = 5000, 20
	for r := range rounds {
		l.round([]fleet.Conflict{forgedConflict(self, r, forged)}, r == 0)
		if len(l.reported) > 1 {
			t.Errorf("round %d: %d conflicts remembered, want at most one per provider name", r, len(l.reported))
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	conflictLines := 0
	for _, line := range lines {
		if len(line) > 4096 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
		if strings.Contains(line, "defines a provider of this name differently") {
			conflictLines++
			if want := fmt.Sprintf("elsewhere_not_shown=%d", forged-logDefinitions); !strings.Contains(line, want) {
				t.Errorf("line does not say how many were left out (%s): %.300s…", want, line)
			}
			if !strings.Contains(line, "and 1 more") {
				t.Errorf("line does not say how many processors were left out: %.300s…", line)
			}
		}
	}
	if conflictLines != rounds {
		t.Errorf("%d conflict lines for %d changed conflicts, want one each", conflictLines, rounds)
	}
	l.round(nil, false)
	if len(l.reported) != 0 {
		t.Errorf("%d conflicts remembered after every conflict ended, want none", len(l.reported))
	}
}
