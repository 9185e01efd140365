package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// TestCrashLosesNothingAndCallsNoProviderTwice is the crash half of "Nothing
// lost, nothing done twice", with real processes: processor A is SIGKILLed
// in the middle of 500 requests, processor B starts afterwards, and
//
//   - every request ends with exactly one ok result in DETOUR_RESULTS;
//   - no request whose result A stored calls the provider again (a
//     redelivery that finds its stored result is acked: that covers the
//     ones whose ack died with A);
//   - the only requests that reach the provider twice are those A was
//     calling when it died, at most one per worker of A, so the provider
//     sees at most 500 + (A's calls in flight at the kill) calls;
//   - every request is acknowledged in the end, nothing waits for a later
//     redelivery.
//
// A and B use chain files that differ only in the model name, so the fake
// provider's log tells exactly which process made each call and the stored
// result's model tells which process answered.
func TestCrashLosesNothingAndCallsNoProviderTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as OS processes")
	}
	const (
		n        = 500
		workers  = 64
		killAt   = 150 // provider calls received before A is killed
		modelA   = "model-a"
		modelB   = "model-b"
		callTime = 200 * time.Millisecond
	)
	bin := buildProcessor(t)
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	fake := providertest.New(providertest.OpenAI, providertest.Slow(callTime, providertest.OK()))
	t.Cleanup(fake.Close)
	settings := []string{fmt.Sprintf("DETOUR_WORKERS=%d", workers), "DETOUR_ACK_WAIT=2s", "DETOUR_SHUTDOWN_TIMEOUT=10s", "DETOUR_LOG_LEVEL=debug"}

	a := startProcess(t, bin, "A", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, modelA), settings...))
	waitConsuming(t, a)
	ctx := context.Background()
	for i := range n {
		if _, err := publishRequest(ctx, js, requestID(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "the provider to receive calls from A", func() bool { return fake.Requests() >= killAt }, a)
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(testChain))
	if err != nil {
		t.Fatal(err)
	}
	a.signal(t, syscall.SIGKILL)
	callsAtKill, inFlightAtKill := fake.Requests(), fake.InFlight()
	if err := a.wait(t, 10*time.Second); err == nil {
		t.Fatal("processor A exited cleanly after SIGKILL")
	}
	// What A held at the kill, as the server counts it: the deliveries A
	// never acked (all of them come back to B after AckWait, 2 s). A pulls
	// only what its workers start, so this is what it had in flight.
	killInfo, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	heldAtKill := killInfo.NumAckPending
	callsA := fake.Requests() // A is gone: no call can come from it any more
	// Count what A stored once the server has read all that A's connection
	// carried (the stream stores it a moment later).
	waitUntil(t, 10*time.Second, "the server to drop A's connection", func() bool { return srv.NumClients() == 1 })
	time.Sleep(200 * time.Millisecond)
	storedAtKill := storedResults(t, js)
	t.Logf("A killed after %d provider calls with %d in flight; %d results stored; %d calls from A in all",
		callsAtKill, inFlightAtKill, storedAtKill, callsA)
	if storedAtKill >= n {
		t.Fatalf("A answered all %d requests before the kill; the test proves nothing", n)
	}

	b := startProcess(t, bin, "B", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, modelB), settings...))
	restart := time.Now()
	waitAllResults(t, js, n, 60*time.Second, b)
	recovered := time.Since(restart)
	// The requests whose result A stored but whose ack died with A come
	// back after AckWait (2 s); B must ack them without a provider call.
	waitRequestsSettled(t, js, 10*time.Second)
	b.stop(t, 15*time.Second)
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}

	byID := checkExactlyOneOKResult(t, js, n)
	calls := callsByModel(t, fake)
	var answeredByA, answeredByB, lostInFlight, bufferedByA, redelivered, callsB int
	var deliveries uint64 // deliveries the results account for
	for i := range n {
		id := requestID(i)
		res, c := byID[id], calls[id]
		callsB += c[modelB]
		deliveries += res.Deliveries
		if res.Deliveries > 1 {
			redelivered++
		}
		switch {
		case len(c) > 2 || c[modelA] > 1 || c[modelB] > 1:
			t.Errorf("%s: provider calls %v, want at most one from each processor", id, c)
		case res.Model == modelA:
			answeredByA++
			if c[modelB] != 0 {
				t.Errorf("%s: A stored its result, yet B called the provider again (calls %v)", id, c)
			}
		case res.Model == modelB:
			answeredByB++
			if c[modelB] != 1 {
				t.Errorf("%s: B stored its result with %d calls of its own, want 1", id, c[modelB])
			}
			if c[modelA] == 1 {
				lostInFlight++ // A called the provider, then died before storing the answer
			} else if res.Deliveries > 1 {
				bufferedByA++ // delivered to A, never started there
			}
		default:
			t.Errorf("%s: answered by model %q", id, res.Model)
		}
	}
	total := fake.Requests()
	t.Logf("after the restart: all %d results in %v; A answered %d, B %d; %d redelivered, of which %d were in A's calls at the kill and %d only delivered to A",
		n, recovered.Round(time.Millisecond), answeredByA, answeredByB, redelivered, lostInFlight, bufferedByA)
	// A request whose result A stored but whose ack died with A was
	// delivered to B once more, and B acked it after finding the result
	// (docs/results.md, "Where results go"): such deliveries appear in no
	// result.
	t.Logf("deliveries: %d in all, %d accounted for by results; %d answered by A and redelivered after its ack was lost",
		ci.Delivered.Consumer, deliveries, ci.Delivered.Consumer-deliveries)
	t.Logf("provider calls: %d in all = %d from A + %d from B; bound %d + %d held by A at the kill (%d of them lost in flight)",
		total, callsA, callsB, n, heldAtKill, lostInFlight)
	if heldAtKill > workers {
		t.Errorf("A held %d unacknowledged deliveries at the kill, more than its %d workers", heldAtKill, workers)
	}
	if lostInFlight > heldAtKill {
		t.Errorf("%d of A's calls were lost, more than the %d deliveries it held at the kill", lostInFlight, heldAtKill)
	}
	if lostInFlight == 0 {
		t.Errorf("no call of A was in flight at the kill; the test proves nothing")
	}
	if total != callsA+callsB || total > n+heldAtKill {
		t.Errorf("provider received %d calls, want at most %d (%d requests + %d held by A at the kill)", total, n+heldAtKill, n, heldAtKill)
	}
}
