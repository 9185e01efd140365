package fleet_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/kvstate"
)

// TestWithConflicts: a conflict joins its provider's row, and one about a
// provider without a row gets a row of its own; other rows stay as they
// are. WriteConflicts prints each definition with its processors.
func TestWithConflicts(t *testing.T) {
	old := fleet.Held{Definition: fleet.Definition{Fingerprint: "aa", Type: "openai", BaseURL: "http://old"}, Processors: []string{"p1"}}
	cur := fleet.Held{Definition: fleet.Definition{Fingerprint: "bb", Type: "openai", BaseURL: "http://new"}, Processors: []string{"p2"}}
	conflicts := []fleet.Conflict{
		{Provider: "backup", Definitions: []fleet.Held{old, cur}},
		{Provider: "ghost", Definitions: []fleet.Held{old, cur}},
	}
	rows := fleet.WithConflicts([]kvstate.ProviderStatus{{Provider: "primary"}, {Provider: "backup"}}, conflicts)
	if len(rows) != 3 || rows[0].Provider != "primary" || rows[0].Conflict != nil ||
		rows[1].Provider != "backup" || len(rows[1].Conflict) != 2 || rows[2].Provider != "ghost" || len(rows[2].Conflict) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	var buf bytes.Buffer
	if err := fleet.WriteConflicts(&buf, conflicts, nil); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"CONFLICT: provider backup", "CONFLICT: provider ghost", "http://old", "[p1]", "http://new", "[p2]"} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteConflicts lacks %q:\n%s", want, out)
		}
	}
}
