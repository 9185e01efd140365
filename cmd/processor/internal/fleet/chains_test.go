package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

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
	if err := fleet.WriteChainConflicts(&buf, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CONFLICT: chain default has different providers", "[primary backup]  on [p1 p3]", "[backup primary]  on [p2]"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("WriteChainConflicts lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestMetadataAnnouncesChains: what Metadata announces of the chains is
// what Discover reads back.
func TestMetadataAnnouncesChains(t *testing.T) {
	f := &config.File{Providers: []config.Provider{provider("https://a.example.com/v1")},
		Chains: map[string][]string{"default": {"primary"}, "other": {"primary"}}}
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	svc, err := micro.AddService(nc, micro.Config{Name: "detour", Version: "1.0.0", Metadata: fleet.Metadata("p1", f)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	got, err := fleet.Discover(context.Background(), nc, "detour", time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("Discover = %+v, %v", got, err)
	}
	if !slices.Equal(got[0].Chains["default"], []string{"primary"}) || len(got[0].Chains) != 2 || len(got[0].Providers) != 1 {
		t.Errorf("read back %+v, want both chains and the provider", got[0])
	}
}

// TestDiscoverBoundsForgedChains: a round keeps at most MaxVariants lists
// of one chain name, none longer than MaxChainLength, none with a name no
// chain file accepts, and MaxPerResponder chains of one announcement,
// beside as many definitions: many chains leave out no provider.
func TestDiscoverBoundsForgedChains(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	forger, _ := natstest.Connect(t, srv)
	info := func(md map[string]string) []byte {
		b, err := json.Marshal(micro.Info{ServiceIdentity: micro.ServiceIdentity{Name: "detour", ID: "x", Version: "1.0.0", Metadata: md}, Type: micro.InfoResponseType})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	list := func(names ...string) string { b, _ := json.Marshal(names); return string(b) }
	var replies [][]byte
	for i := range 20 {
		replies = append(replies, info(map[string]string{fleet.KeyProcessor: fmt.Sprintf("variant-%d", i),
			fleet.KeyChainPrefix + "default": list(fmt.Sprintf("p%d", i))}))
	}
	long := make([]string, fleet.MaxChainLength+1)
	for i := range long {
		long[i] = fmt.Sprintf("p%d", i)
	}
	replies = append(replies, info(map[string]string{fleet.KeyProcessor: "odd",
		fleet.KeyChainPrefix + "long":      list(long...),
		fleet.KeyChainPrefix + "bad name!": list("p"),
		fleet.KeyChainPrefix + "badmember": list("p q"),
		fleet.KeyChainPrefix + "empty":     list(),
		fleet.KeyChainPrefix + "notjson":   "{",
		fleet.KeyChainPrefix + "fine":      list("p"),
	}))
	big := map[string]string{fleet.KeyProcessor: "big"}
	for i := range fleet.MaxPerResponder + 5 {
		big[fmt.Sprintf("%sc%03d", fleet.KeyChainPrefix, i)] = list("p")
	}
	for i := range fleet.MaxPerResponder {
		big[fmt.Sprintf("%sp%03d", fleet.KeyProviderPrefix, i)] = forgedDefinition(i)
	}
	replies = append(replies, info(big))
	sub, err := forger.Subscribe("$SRV.INFO.detour", func(m *nats.Msg) {
		for _, r := range replies {
			_ = forger.Publish(m.Reply, r)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := fleet.Discover(context.Background(), nc, "detour", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, in := range got {
		switch {
		case strings.HasPrefix(in.Processor, "variant-"):
			lists += len(in.Chains)
		case in.Processor == "odd":
			if len(in.Chains) != 1 || in.Chains["fine"] == nil || in.Omitted != 5 {
				t.Errorf("odd: kept %v, left out %d; want chain fine alone, 5 left out", in.Chains, in.Omitted)
			}
		case in.Processor == "big":
			if len(in.Chains) != fleet.MaxPerResponder || len(in.Providers) != fleet.MaxPerResponder || in.Omitted != 5 {
				t.Errorf("big: %d chains and %d definitions kept, %d left out; want %d each, 5 left out",
					len(in.Chains), len(in.Providers), in.Omitted, fleet.MaxPerResponder)
			}
		}
	}
	if lists != fleet.MaxVariants {
		t.Errorf("%d lists of chain default kept, want %d", lists, fleet.MaxVariants)
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
	if err := fleet.WriteConflicts(&buf, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "on [p2]  circuit primary=bbbbbbbb") {
		t.Errorf("WriteConflicts:\n%s", buf.String())
	}
}
