package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// TestShutdownHandsBackWithoutWaitingForAckWait is the graceful-shutdown
// half of "Nothing lost, nothing done twice", with real processes:
// processors A and B share a steady load that exceeds what they can do, and
// A gets SIGTERM in the middle of it, with a shutdown timeout (100ms) shorter
// than a provider call (300ms): what A is still calling then is canceled and
// handed back.
//
//   - A exits with status 0 within DETOUR_SHUTDOWN_TIMEOUT + 5s.
//   - Every request is answered exactly once: one ok result per id, and the
//     provider receives one call per request plus, for a request A handed
//     back, A's canceled call.
//   - Nothing A held waits for AckWait. DETOUR_ACK_WAIT is 30s, longer than
//     the whole test, so any delivery of A that was neither finished nor
//     handed back would not be answered before the test gives up (25 s after
//     A's exit), and an ack A failed to flush would leave the consumer with
//     ack-pending deliveries; both fail the test.
//   - Hand-backs are immediate: a request answered on a second delivery was
//     one A NAK'd at shutdown (no other redelivery can happen within 30s).
//     The server gives redeliveries priority, so B starts it as soon as a
//     worker of B is free: within the shutdown timeout, B's in-flight calls
//     and A's other hand-backs, 3 call times, plus a second. Its start is
//     read from the result: publish time + queued_ms. This separates a NAK
//     without delay from an AckWait redelivery (≥ 30s) or any NakWithDelay
//     longer than a second.
//   - B keeps its pace: the last result is stored within the time B needs for
//     what was left at A's exit (at its full rate, plus 25% and 2s), so the
//     hand-over stalls nothing either.
func TestShutdownHandsBackWithoutWaitingForAckWait(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as OS processes")
	}
	const (
		n               = 300
		workers         = 8
		callTime        = 300 * time.Millisecond
		publishEvery    = 12500 * time.Microsecond // 80/s; A and B together answer 53/s
		shutdownTimeout = 100 * time.Millisecond
		ackWait         = 30 * time.Second
		modelA          = "model-a"
		modelB          = "model-b"
	)
	bin := buildProcessor(t)
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	fake := providertest.New(providertest.OpenAI, providertest.Slow(callTime, providertest.OK()))
	t.Cleanup(fake.Close)
	settings := []string{
		fmt.Sprintf("DETOUR_WORKERS=%d", workers),
		fmt.Sprintf("DETOUR_ACK_WAIT=%s", ackWait),
		fmt.Sprintf("DETOUR_SHUTDOWN_TIMEOUT=%s", shutdownTimeout),
		"DETOUR_LOG_LEVEL=debug",
	}
	a := startProcess(t, bin, "A", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, modelA), settings...))
	b := startProcess(t, bin, "B", processorEnv(t, srv.ClientURL(), writeChainFile(t, fake.URL, modelB), settings...))
	waitConsuming(t, a, b)

	// The steady load runs in its own goroutine, which ends by itself
	// after n requests or at the first error; the test waits for it below.
	published := make([]time.Time, n)
	pubErr := make(chan error, 1)
	var pubDone sync.WaitGroup
	pubDone.Add(1)
	go func() {
		defer pubDone.Done()
		tick := time.NewTicker(publishEvery)
		defer tick.Stop()
		for i := range n {
			at, err := publishRequest(context.Background(), js, requestID(i))
			if err != nil {
				pubErr <- err
				return
			}
			published[i] = at
			<-tick.C
		}
		close(pubErr)
	}()
	t.Cleanup(pubDone.Wait)

	// SIGTERM once both processors are busy and a backlog waits: then A is
	// surely in the middle of calls.
	cons, err := js.Consumer(context.Background(), wire.RequestsStream, wire.ConsumerName(testChain))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a backlog", func() bool {
		ci, err := cons.Info(context.Background())
		return err == nil && fake.Requests() >= 4*workers && ci.NumPending >= 2*workers
	}, a, b)
	callsAtTerm, inFlightAtTerm := fake.Requests(), fake.InFlight()
	term := time.Now()
	a.signal(t, syscall.SIGTERM)
	if err := a.wait(t, shutdownTimeout+5*time.Second); err != nil {
		t.Fatalf("processor A exited with %v after SIGTERM, want status 0", err)
	}
	exit := a.at
	answeredAtExit := storedResults(t, js)
	t.Logf("SIGTERM to A after %d provider calls, %d in flight; A exited 0 after %v with %d results stored",
		callsAtTerm, inFlightAtTerm, exit.Sub(term).Round(time.Millisecond), answeredAtExit)

	// Stay below AckWait counted from the SIGTERM: a delivery of A left to
	// time out is then never answered here.
	waitAllResults(t, js, n, ackWait-5*time.Second, b)
	if err, ok := <-pubErr; ok {
		t.Fatal(err)
	}
	waitRequestsSettled(t, js, 3*time.Second)
	b.stop(t, shutdownTimeout+5*time.Second)

	byID := checkExactlyOneOKResult(t, js, n)
	calls := callsByModel(t, fake)
	handBackBound := shutdownTimeout + 3*callTime + time.Second
	var answeredByA, handedBack, canceledCalls int
	var lastStored time.Time
	var handBackDelays []time.Duration
	for i := range n {
		id := requestID(i)
		res, c := byID[id], calls[id]
		if res.Deliveries < 2 && c[modelA]+c[modelB] != 1 {
			t.Errorf("%s: provider calls %v, want exactly one", id, c)
		}
		if c[res.Model] != 1 {
			t.Errorf("%s: answered by %q but provider calls were %v", id, res.Model, c)
		}
		if res.stored.After(lastStored) {
			lastStored = res.stored
		}
		if res.Model == modelA {
			answeredByA++
		}
		if res.Deliveries < 2 {
			continue
		}
		handedBack++
		canceledCalls += c[modelA]
		if res.Model != modelB || c[modelA] > 1 {
			t.Errorf("%s: delivery %d answered by %q with calls %v; only B can answer what A handed back, after at most one canceled call of A",
				id, res.Deliveries, res.Model, c)
		}
		started := published[i].Add(time.Duration(res.QueuedMs) * time.Millisecond)
		delay := started.Sub(term)
		handBackDelays = append(handBackDelays, delay)
		if delay > handBackBound {
			t.Errorf("%s: handed back by A, started by B %v after the SIGTERM, want within %v", id, delay.Round(time.Millisecond), handBackBound)
		}
	}
	slices.Sort(handBackDelays)
	remaining := n - answeredAtExit
	tailBound := time.Duration(float64(remaining)/workers*float64(callTime)*1.25) + 2*time.Second
	tail := lastStored.Sub(exit)
	t.Logf("A answered %d, B %d; %d handed back by A, started by B %v after the SIGTERM (bound %v)",
		answeredByA, n-answeredByA, handedBack, delaySummary(handBackDelays), handBackBound)
	t.Logf("after A's exit: %d requests left, last result %v later (bound %v); %d provider calls for %d requests, %d canceled by the shutdown",
		remaining, tail.Round(time.Millisecond), tailBound.Round(time.Millisecond), fake.Requests(), n, canceledCalls)
	if handedBack == 0 {
		t.Errorf("A handed nothing back although it was stopped under a backlog; the test proves nothing")
	}
	// A's last words say how many it handed back.
	if m := regexp.MustCompile(`msg="shutdown complete" handed_back=(\d+)\n`).FindStringSubmatch(a.out.String()); m == nil || m[1] != strconv.Itoa(handedBack) {
		t.Errorf("A's shutdown log %q; want handed_back=%d", m, handedBack)
	}
	if tail > tailBound {
		t.Errorf("the last result came %v after A's exit, want within %v for %d requests at B's rate", tail, tailBound, remaining)
	}
	if fake.Requests() != n+canceledCalls {
		t.Errorf("provider received %d calls for %d requests and %d calls canceled by the shutdown", fake.Requests(), n, canceledCalls)
	}
}

// delaySummary prints the smallest, median and largest of sorted delays.
func delaySummary(d []time.Duration) string {
	if len(d) == 0 {
		return "(none)"
	}
	r := func(x time.Duration) time.Duration { return x.Round(time.Millisecond) }
	return fmt.Sprintf("min %v, median %v, max %v", r(d[0]), r(d[len(d)/2]), r(d[len(d)-1]))
}
