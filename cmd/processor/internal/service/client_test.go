package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/wire"
)

// TestClientCollectsEveryResult checks what the publisher relies on: n
// copies of a prompt are published and each result is collected, annotated.
func TestClientCollectsEveryResult(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())

	c, err := client.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]wire.Request, 5)
	for i := range reqs {
		reqs[i] = wire.Request{Messages: []chain.Message{{Role: "user", Content: "hello"}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	outcomes, err := c.PublishAll(ctx, "default", reqs, client.Options{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range outcomes {
		if o.Err != nil || o.Result.Status != chain.StatusOK || o.Result.Model != "solo-model" || o.Result.ID != o.ID {
			t.Fatalf("outcome %+v", o)
		}
		seen[o.ID] = true
	}
	if len(seen) != len(reqs) || solo.Requests() != len(reqs) {
		t.Fatalf("%d distinct results, %d provider calls; want %d each", len(seen), solo.Requests(), len(reqs))
	}
}

// TestClientReportsAnUnknownChain checks that publishing to a chain no
// processor configured fails at once with a clear error.
func TestClientReportsAnUnknownChain(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())
	c, err := client.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PublishAll(context.Background(), "nosuch", []wire.Request{{Messages: []chain.Message{{Role: "user", Content: "x"}}}}, client.Options{Wait: true})
	if err == nil {
		t.Fatal("publishing to an unknown chain succeeded")
	}
	t.Log(err)
}
