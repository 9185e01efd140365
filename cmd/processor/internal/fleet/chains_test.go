package fleet_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
)

// TestChainConflicts finds the chains run with different providers, and
// only those: the fallback order counts, and a chain only one processor
// runs is no conflict.
func TestChainConflicts(t *testing.T) {
	in := func(id string, chains map[string][]string) fleet.Instance {
		return fleet.Instance{Processor: id, Chains: chains}
	}
	instances := []fleet.Instance{
		in("p1", map[string][]string{"default": {"primary", "backup"}, "cheap": {"economy"}}),
		in("p2", map[string][]string{"default": {"backup", "primary"}, "solo": {"primary"}}),
		in("p3", map[string][]string{"default": {"primary", "backup"}, "cheap": {"economy"}}),
	}
	c := fleet.ChainConflicts(instances)
	if len(c) != 1 || c[0].Chain != "default" || len(c[0].Lists) != 2 {
		t.Fatalf("conflicts %+v, want chain default's two lists", c)
	}
	byList := map[string]string{}
	for _, l := range c[0].Lists {
		byList[strings.Join(l.Providers, " ")] = strings.Join(l.Processors, ",")
	}
	if byList["primary backup"] != "p1,p3" || byList["backup primary"] != "p2" {
		t.Errorf("processors by list %v", byList)
	}
	if got := fleet.ChainsInvolving(c, "p9"); len(got) != 0 {
		t.Errorf("ChainsInvolving a processor in none: %v", got)
	}
	if s := c[0].String(); !strings.Contains(s, "[primary backup] (on p1, p3)") || !strings.Contains(s, "[backup primary] (on p2)") {
		t.Errorf("String: %s", s)
	}
	var buf bytes.Buffer
	if err := fleet.WriteConflicts(&buf, nil, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CONFLICT: chain default has different providers", "[primary backup]  on [p1 p3]", "[backup primary]  on [p2]"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("WriteConflicts lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestRunningReadsTheBucket: the commands beside a fleet read what its
// processors record, chains and definitions, from the provider bucket;
// before any processor created the bucket, nothing runs.
func TestRunningReadsTheBucket(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx := context.Background()
	if got, err := fleet.Running(ctx, js); err != nil || got != nil {
		t.Fatalf("without the bucket: %+v, %v; want none", got, err)
	}
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	f := &config.File{Providers: []config.Provider{provider("https://a.example.com/v1")},
		Chains: map[string][]string{"default": {"primary"}, "other": {"primary"}}}
	for _, id := range []string{"p1", "p2"} {
		if err := kvstate.New(js, kv, kvstate.Options{ID: id}).Record(ctx, id, fleet.Record(id, f), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	got, err := fleet.Running(ctx, js)
	if err != nil || len(got) != 2 || got[0].Processor != "p1" || got[1].Processor != "p2" {
		t.Fatalf("Running = %+v, %v; want p1 and p2", got, err)
	}
	if !slices.Equal(got[0].Chains["default"], []string{"primary"}) || len(got[0].Chains) != 2 || len(got[0].Providers) != 1 {
		t.Errorf("read back %+v, want both chains and the provider", got[0])
	}
}

// TestWithCircuits names each definition's circuit: the plain name for
// the holder's, provider=<short fingerprint> for another, each its own
// under a holder without a fingerprint, none while no one holds the name;
// WriteConflicts prints it beside the definition.
func TestWithCircuits(t *testing.T) {
	held := fleet.Held{Definition: fleet.Definition{Fingerprint: "aaaaaaaaaaaaaaaa", Type: "openai", BaseURL: "http://old"}, Processors: []string{"p1"}}
	other := fleet.Held{Definition: fleet.Definition{Fingerprint: "bbbbbbbbbbbbbbbb", Type: "openai", BaseURL: "http://new"}, Processors: []string{"p2"}}
	conflicts := []fleet.Conflict{{Provider: "primary", Definitions: []fleet.Held{held, other}}}
	got := fleet.WithCircuits(conflicts, func(string) (kvstate.Holder, bool) { return kvstate.Holder{Fingerprint: held.Fingerprint}, true })
	if got[0].Definitions[0].Circuit != "primary" || got[0].Definitions[1].Circuit != "primary=bbbbbbbb" {
		t.Fatalf("circuits %+v", got[0].Definitions)
	}
	none := fleet.WithCircuits(conflicts, func(string) (kvstate.Holder, bool) { return kvstate.Holder{}, false })
	if none[0].Definitions[0].Circuit != "" || none[0].Definitions[1].Circuit != "" {
		t.Errorf("circuits of a name no one holds %+v, want none", none[0].Definitions)
	}
	// A holder without a fingerprint holds the name for a definition no
	// processor runs, as kvstate.Store.CircuitOf reads it.
	nobody := fleet.WithCircuits(conflicts, func(string) (kvstate.Holder, bool) { return kvstate.Holder{By: "x"}, true })
	if nobody[0].Definitions[0].Circuit != "primary=aaaaaaaa" || nobody[0].Definitions[1].Circuit != "primary=bbbbbbbb" {
		t.Errorf("circuits under a holder without a fingerprint %+v, want each definition's own", nobody[0].Definitions)
	}
	if conflicts[0].Definitions[0].Circuit != "" {
		t.Error("WithCircuits changed the conflicts it was given")
	}
	var buf bytes.Buffer
	if err := fleet.WriteConflicts(&buf, got, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "on [p2]  circuit primary=bbbbbbbb") {
		t.Errorf("WriteConflicts:\n%s", buf.String())
	}
}
