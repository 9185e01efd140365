package stream_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// pullRequest is what a pull asks of the server ($JS.API.CONSUMER.MSG.NEXT,
// the JetStream API's JSApiRequestNextT).
type pullRequest struct {
	Batch   int   `json:"batch"`
	NoWait  bool  `json:"no_wait"`
	Expires int64 `json:"expires"` // nanoseconds; zero when the pull does not wait

	at time.Time // when the spy saw it
}

// pullSpy records the pull requests made on the consumers of chains.
type pullSpy struct {
	mu    sync.Mutex
	pulls map[string][]pullRequest // by chain
}

func spyOnPulls(t *testing.T, nc *nats.Conn, chains ...string) *pullSpy {
	t.Helper()
	s := &pullSpy{pulls: map[string][]pullRequest{}}
	for _, name := range chains {
		subject := "$JS.API.CONSUMER.MSG.NEXT." + wire.RequestsStream + "." + wire.ConsumerName(name)
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			var r pullRequest
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Errorf("pull request %q: %v", m.Data, err)
				return
			}
			r.at = time.Now()
			s.mu.Lock()
			s.pulls[name] = append(s.pulls[name], r)
			s.mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *pullSpy) of(chainName string) []pullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pullRequest(nil), s.pulls[chainName]...)
}

// consumeChains starts a processor answering every chain named with
// runner, consuming with workers, and stops it when the test ends.
func consumeChains(t *testing.T, workers int, chains ...string) (*nats.Conn, *pullSpy) {
	t.Helper()
	return consumeChainsAfter(t, workers, nil, chains...)
}

// consumeChainsAfter is consumeChains calling queue, when not nil, once the
// streams exist and before the processor starts.
func consumeChainsAfter(t *testing.T, workers int, queue func(*nats.Conn), chains ...string) (*nats.Conn, *pullSpy) {
	t.Helper()
	nc, js, p := newProcessor(t, time.Hour, func() stream.Runner { return &countingRunner{} }, chains...)
	spy := spyOnPulls(t, nc, chains...)
	if queue != nil {
		queue(nc)
	}
	consume(t, js, p, workers, chains...)
	return nc, spy
}

// testTopology is the topology of the tests' processors: chains, their
// requests kept for requestTTL.
func testTopology(requestTTL time.Duration, chains ...string) topology.Streams {
	return topology.Streams{
		Chains: chains, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
	}
}

// newProcessor starts an embedded server with testTopology's streams and
// returns a processor answering each chain with a runner of its own from
// newRunner.
func newProcessor(t *testing.T, requestTTL time.Duration, newRunner func() stream.Runner, chains ...string) (*nats.Conn, jetstream.JetStream, *stream.Processor) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, testTopology(requestTTL, chains...)); err != nil {
		t.Fatal(err)
	}
	runners := map[string]stream.Runner{}
	for _, name := range chains {
		runners[name] = newRunner()
	}
	p, err := stream.NewProcessor(ctx, nc, js, stream.ProcessorConfig{
		Chains: runners, ReplyPrefixes: []string{"_INBOX."}, MaxPayload: 1 << 20, RequestTTL: requestTTL, AckWait: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, p
}

// consume runs p on chains with workers until the test ends.
func consume(t *testing.T, js jetstream.JetStream, p *stream.Processor, workers int, chains ...string) {
	t.Helper()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- stream.Consume(runCtx, js, p, stream.ConsumerConfig{Chains: chains, Workers: workers, ShutdownTimeout: time.Second})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

// nextDelivery fetches the next delivery of chainName's consumer, failing
// the test when none comes within 5 s.
func nextDelivery(t *testing.T, js jetstream.JetStream, chainName string) jetstream.Msg {
	t.Helper()
	cons, err := js.Consumer(t.Context(), wire.RequestsStream, wire.ConsumerName(chainName))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg := <-batch.Messages()
	if msg == nil {
		t.Fatalf("no delivery of %s within 5s", chainName)
	}
	return msg
}

// requestBody is a request of one user message with id.
func requestBody(id string) []byte {
	body, _ := json.Marshal(wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hi"}}})
	return body
}

// ask publishes one request of chainName and waits for its result.
func ask(t *testing.T, nc *nats.Conn, chainName, id string) {
	t.Helper()
	sub, err := nc.SubscribeSync(wire.ResultSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	body := requestBody(id)
	if _, err := nc.Request(wire.RequestSubject(chainName), body, 5*time.Second); err != nil {
		t.Fatalf("publishing %s: %v", id, err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("result of %s: %v", id, err)
	}
}

// TestATrickleOfRequestsIsPulledInBatches: requests that come one at a
// time to a processor's only chain are taken by pulls that wait on every
// free worker and hand each delivery on as it comes, so a trickle costs
// about one pull per batch of workers, not a pull or two per request. No
// pull asks for more deliveries than there are workers.
func TestATrickleOfRequestsIsPulledInBatches(t *testing.T) {
	const workers, requests = 8, 40
	nc, spy := consumeChains(t, workers, "default")
	for i := range requests {
		ask(t, nc, "default", "trickle-"+strconv.Itoa(i))
	}
	pulls := spy.of("default")
	t.Logf("%d pulls for %d requests", len(pulls), requests)
	if len(pulls) == 0 {
		t.Fatal("no pull seen, yet every request was answered")
	}
	// One pull per batch of workers, the one still waiting, one more each
	// time a waiting pull runs out (every pullWait, a second, counted from
	// the first pull, made while the processor started); a pull or two per
	// request would make 40 to 80, and a pull that does not wait before
	// each that does, 5 more.
	if most := requests/workers + 2 + int(time.Since(pulls[0].at)/time.Second); len(pulls) > most {
		t.Errorf("%d pulls for %d requests that came one at a time, want at most %d", len(pulls), requests, most)
	}
	for _, r := range pulls {
		if r.Batch > workers {
			t.Errorf("a pull asked for %d deliveries, more than the %d workers", r.Batch, workers)
		}
		if r.Expires == 0 {
			t.Errorf("the only chain pulled without waiting (%+v): a second round trip per batch", r)
		}
	}
}

// TestTheOnlyChainTakesABacklogNoFasterThanItsWorkers: the only chain's
// pulls all wait, and a pull that waits takes at once what is already
// queued; still none asks for more deliveries than there are free
// workers, so none is taken only to be handed back (and delivered again),
// and none waits unseen in the client while its AckWait runs.
func TestTheOnlyChainTakesABacklogNoFasterThanItsWorkers(t *testing.T) {
	const workers, requests = 4, 40
	var results *nats.Subscription
	nc, spy := consumeChainsAfter(t, workers, func(nc *nats.Conn) {
		var err error
		if results, err = nc.SubscribeSync(wire.ResultsPrefix + ">"); err != nil {
			t.Fatal(err)
		}
		for i := range requests {
			if _, err := nc.Request(wire.RequestSubject("default"), requestBody("backlog-"+strconv.Itoa(i)), 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}, "default")
	for range requests {
		if _, err := results.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("results: %v", err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Consumer(t.Context(), wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().NumRedelivered; n != 0 {
		t.Errorf("%d deliveries were handed back and delivered again; a pull took more than its free workers", n)
	}
	for _, r := range spy.of("default") {
		if r.Batch > workers {
			t.Errorf("a pull asked for %d deliveries, more than the %d workers", r.Batch, workers)
		}
		if r.Expires == 0 {
			t.Errorf("the only chain pulled without waiting (%+v)", r)
		}
	}
}

// TestAnIdleChainWaitsOnOneWorker: when a processor consumes several
// chains, a chain waiting for requests holds one worker, not every free
// one, so the others' work is not held up by it.
func TestAnIdleChainWaitsOnOneWorker(t *testing.T) {
	const workers = 8
	nc, spy := consumeChains(t, workers, "quiet", "busy")
	for i := range 5 {
		ask(t, nc, "busy", "busy-"+strconv.Itoa(i))
	}
	waiting := 0
	for _, name := range []string{"quiet", "busy"} {
		for _, r := range spy.of(name) {
			if r.Expires == 0 {
				continue // a pull that takes what is there and does not wait
			}
			waiting++
			if r.Batch != 1 {
				t.Errorf("chain %s waited for %d deliveries, want 1", name, r.Batch)
			}
		}
	}
	if waiting == 0 {
		t.Fatal("no pull waited for requests")
	}
}
