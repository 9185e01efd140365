package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/internal/natstest"
)

// forgedDefinition is a definition a processor could announce, with a
// fingerprint of its own.
func forgedDefinition(i int) string {
	b, _ := json.Marshal(fleet.Definition{Fingerprint: fmt.Sprintf("%016x", i), Type: "openai", Model: "m", Policy: "p"})
	return string(b)
}

// TestDiscoverBoundsForgedAnnouncements: whoever answers a discovery, a
// round keeps at most MaxResponders announcements, MaxPerResponder
// definitions of one, MaxVariants different definitions of one name, and
// drops what no processor announces (a fingerprint Define never makes, a
// field over its bound); an announcement says how much of it was left out.
func TestDiscoverBoundsForgedAnnouncements(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	forger, _ := natstest.Connect(t, srv)
	const many = 3000
	var replies [][]byte
	info := func(md map[string]string) []byte {
		b, err := json.Marshal(micro.Info{ServiceIdentity: micro.ServiceIdentity{Name: "detour", ID: "x", Version: "1.0.0", Metadata: md}, Type: micro.InfoResponseType})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := map[string]string{fleet.KeyProcessor: "big"}
	for i := range many {
		big[fmt.Sprintf("%sp%04d", fleet.KeyProviderPrefix, i)] = forgedDefinition(i)
	}
	replies = append(replies, info(big))
	for i := range 20 {
		replies = append(replies, info(map[string]string{fleet.KeyProcessor: fmt.Sprintf("variant-%d", i),
			fleet.KeyProviderPrefix + "primary": forgedDefinition(100000 + i)}))
	}
	replies = append(replies, info(map[string]string{
		fleet.KeyProcessor:                     strings.Repeat("x", 100_000),
		fleet.KeyProviderPrefix + "bad-digest": `{"fingerprint":"not hex","type":"openai","policy":"p"}`,
		fleet.KeyProviderPrefix + "long-url":   fmt.Sprintf(`{"fingerprint":"00000000000000ff","type":"openai","base_url":"http://%s","policy":"p"}`, strings.Repeat("a", 100_000)),
		fleet.KeyProviderPrefix + "bad name!":  forgedDefinition(7),
	}))
	for i := range fleet.MaxResponders + 50 {
		replies = append(replies, info(map[string]string{fleet.KeyProcessor: fmt.Sprintf("empty-%d", i)}))
	}
	sub, err := forger.Subscribe("$SRV.INFO.detour", func(m *nats.Msg) {
		for _, r := range replies {
			if err := forger.Publish(m.Reply, r); err != nil {
				t.Errorf("forged reply: %v", err)
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}

	got, err := fleet.Discover(context.Background(), nc, "detour", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != fleet.MaxResponders {
		t.Errorf("%d announcements kept, want %d", len(got), fleet.MaxResponders)
	}
	total, variants := 0, 0
	for _, in := range got {
		total += len(in.Providers)
		if len(in.Processor) > 400 {
			t.Errorf("a processor id of %d bytes kept", len(in.Processor))
		}
		if in.Processor == "big" {
			if len(in.Providers) != fleet.MaxPerResponder || in.Omitted != many-fleet.MaxPerResponder {
				t.Errorf("big: %d definitions kept, %d left out; want %d and %d", len(in.Providers), in.Omitted, fleet.MaxPerResponder, many-fleet.MaxPerResponder)
			}
		}
		if _, ok := in.Providers["primary"]; ok {
			variants++
		}
		for name := range in.Providers {
			if name == "bad-digest" || name == "long-url" || name == "bad name!" {
				t.Errorf("definition %q kept", name)
			}
		}
	}
	if variants != fleet.MaxVariants {
		t.Errorf("%d definitions of primary kept, want %d", variants, fleet.MaxVariants)
	}
	if total > fleet.MaxDefinitions {
		t.Errorf("%d definitions kept in all, want at most %d", total, fleet.MaxDefinitions)
	}
}

// TestDiscoverKeepsAFleetThatAgrees: processors that announce the same
// definitions cost one definition each between them, so a fleet of many
// processors, every one with the same providers, is read whole, however
// far past MaxDefinitions its announcements add up.
func TestDiscoverKeepsAFleetThatAgrees(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	forger, _ := natstest.Connect(t, srv)
	const processors, providers = 200, 16 // 3,200 definitions announced
	var replies [][]byte
	for i := range processors {
		md := map[string]string{fleet.KeyProcessor: fmt.Sprintf("proc-%d", i)}
		for p := range providers {
			md[fmt.Sprintf("%sp%02d", fleet.KeyProviderPrefix, p)] = forgedDefinition(p)
		}
		b, err := json.Marshal(micro.Info{ServiceIdentity: micro.ServiceIdentity{Name: "detour", ID: "x", Version: "1.0.0", Metadata: md}, Type: micro.InfoResponseType})
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, b)
	}
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
	if len(got) != processors {
		t.Fatalf("%d announcements kept, want %d", len(got), processors)
	}
	for _, in := range got {
		if len(in.Providers) != providers || in.Omitted != 0 {
			t.Fatalf("%s: %d definitions kept, %d left out; want all %d", in.Processor, len(in.Providers), in.Omitted, providers)
		}
	}
}

// TestDiscoverWithNoProcessorRunning: a discovery that no processor
// answers (the first one's own service not registered yet) finds no one,
// and that is no error.
func TestDiscoverWithNoProcessorRunning(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	got, err := fleet.Discover(context.Background(), nc, "detour", 2*time.Second)
	if err != nil || len(got) != 0 {
		t.Fatalf("Discover = %v, %v; want no one and no error", got, err)
	}
}
