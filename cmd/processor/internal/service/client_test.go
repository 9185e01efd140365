package service_test

import (
	"context"
	"strings"
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

// TestClientSendAndResult: Send publishes and returns the processor's
// annotated result; a request past its deadline comes back as a failed
// result with a nil error, as the client documents; and a request published
// without waiting is collected later by Result, from DETOUR_RESULTS.
func TestClientSendAndResult(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())
	c, err := client.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := c.Send(ctx, "default", request("sent", "hello"))
	if err != nil || res.ID != "sent" || res.Status != chain.StatusOK || res.Model != "solo-model" || res.Provider != "solo" {
		t.Fatalf("Send: %+v, %v; want ok from solo", res, err)
	}

	late := request("late", "hello")
	late.Deadline = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	res, err = c.Send(ctx, "default", late)
	if err != nil || res.Status != chain.StatusFailed || !strings.HasPrefix(res.Error, "expired") {
		t.Fatalf("Send past the deadline: %+v, %v; want a failed result saying expired, and no error", res, err)
	}

	receipt, err := c.Publish(ctx, "default", request("later", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Result(ctx, receipt)
	if err != nil || res.ID != "later" || res.Status != chain.StatusOK {
		t.Fatalf("Result: %+v, %v; want ok", res, err)
	}
	if solo.Requests() != 2 {
		t.Errorf("%d provider calls, want 2 (the late request is not asked)", solo.Requests())
	}
}
