package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// callLog counts a runner's calls per request id; held, when set, keeps
// every call waiting until it is closed.
type callLog struct {
	mu    sync.Mutex
	calls map[string]int
	model string
	held  chan struct{}
}

func newCallLog(model string, held chan struct{}) *callLog {
	return &callLog{calls: map[string]int{}, model: model, held: held}
}

func (l *callLog) Run(ctx context.Context, req *chain.Request) (chain.Result, error) {
	l.mu.Lock()
	l.calls[req.ID]++
	l.mu.Unlock()
	if l.held != nil {
		<-l.held
	}
	return chain.Result{ID: req.ID, Status: chain.StatusOK, Content: l.model + " answers " + req.ID, Provider: "p", Model: l.model}, nil
}

func (l *callLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

func (l *callLog) of(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[id]
}

// settleCount is a Handler that counts the deliveries its processor has
// settled.
type settleCount struct {
	p *stream.Processor
	n atomic.Int32
}

func (s *settleCount) Handle(ctx context.Context, chainName string, msg jetstream.Msg) {
	s.p.Handle(ctx, chainName, msg)
	s.n.Add(1)
}

// repliesPrefix is the reply subjects' prefix: the test listens there.
const repliesPrefix = "_INBOX.cutoff."

// cutOff is how a processor loses its connection in
// TestACutOffProcessorStoresNoSecondResultAndSendsNoSecondReply.
type cutOff struct {
	name string
	// cut cuts the processor's connections off; the test restores them.
	cut func(*natstest.Proxy)
	// window, when set, shortens the results stream's duplicate window:
	// the processor comes back after it has passed.
	window time.Duration
}

// TestACutOffProcessorStoresNoSecondResultAndSendsNoSecondReply: processor
// A holds every request, each with a reply subject, when its connection to
// NATS is cut off. It gets its answers, but cannot store them; its
// deliveries run past AckWait and go to processor B, which answers and
// acks them all. When A is back, its answers are stale: each request has
// exactly one stored result and one reply, B's, however long A was away.
//
//   - A partition (a black hole: the connection stays open, carries
//     nothing, and delivers what it held once it heals) longer than the
//     results stream's duplicate window, shortened here from 2 minutes.
//   - Connections closed, and refused, within the window: the stream drops
//     A's result as a duplicate of B's.
//
// Both processors pay for every request (A's calls were made before it was
// cut off); nothing else is paid twice.
func TestACutOffProcessorStoresNoSecondResultAndSendsNoSecondReply(t *testing.T) {
	for _, tt := range []cutOff{
		{name: "partition past the duplicate window", cut: (*natstest.Proxy).Blackhole, window: time.Second},
		{name: "connections closed", cut: (*natstest.Proxy).Refuse},
	} {
		t.Run(tt.name, func(t *testing.T) { testCutOff(t, tt) })
	}
}

func testCutOff(t *testing.T, tt cutOff) {
	const (
		n       = 30
		ackWait = time.Second
	)
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	topo := topology.Streams{Chains: []string{"default"}, Replicas: 1, AckWait: ackWait, MaxAckPending: 1000,
		ResultTTL: time.Hour}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	if tt.window > 0 {
		results, err := js.Stream(ctx, wire.ResultsStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := results.CachedInfo().Config
		cfg.Duplicates = tt.window
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	replies, err := nc.SubscribeSync(repliesPrefix + ">")
	if err != nil {
		t.Fatal(err)
	}

	// A reaches the server through a proxy, and pings it often enough to
	// notice a partition in a moment.
	proxy := natstest.StartProxy(t, srv.Addr().String())
	ncA, err := nats.Connect(proxy.URL(), nats.PingInterval(200*time.Millisecond), nats.MaxPingsOutstanding(2),
		nats.ReconnectWait(100*time.Millisecond), nats.MaxReconnects(-1), nats.Timeout(500*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the cut-off is no news
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	runA, runB := newCallLog("a", release), newCallLog("b", nil)
	a := &settleCount{p: newCutOffProcessor(t, ncA, jsA, runA, ackWait)}
	consumeWith(t, jsA, a, n)

	for i := range n {
		id := fmt.Sprintf("r%d", i)
		body, _ := json.Marshal(wire.Request{ID: id, ReplyTo: repliesPrefix + id, Messages: []chain.Message{{Role: "user", Content: "hi"}}})
		if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 10*time.Second, "A to call for every request", func() bool { return runA.total() == n })
	tt.cut(proxy)
	close(release) // A has its answers, and nowhere to store them

	b := &settleCount{p: newCutOffProcessor(t, nc, js, runB, ackWait)}
	consumeWith(t, js, b, n)
	within(t, 20*time.Second, "B to answer every request", func() bool { return b.n.Load() == n })
	if tt.window > 0 {
		// B's results are older than the window when A comes back.
		time.Sleep(tt.window + 500*time.Millisecond)
	}
	proxy.Restore()
	within(t, 30*time.Second, "A to settle what it held", func() bool { return a.n.Load() == n })

	results, replied := subjectCounts(t, js, wire.ResultsStream, wire.ResultsPrefix+">"), repliesIn(t, replies, nc, ncA, nc)
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		if got := results[wire.ResultSubject(id)]; got != 1 {
			t.Errorf("%s: %d stored results, want 1", id, got)
		}
		if got := replied[repliesPrefix+id]; got != 1 {
			t.Errorf("%s: %d replies, want 1", id, got)
		}
		if runA.of(id) != 1 || runB.of(id) != 1 {
			t.Errorf("%s: A called %d times, B %d; want once each", id, runA.of(id), runB.of(id))
		}
	}
	for _, r := range readAll(t, js, wire.ResultsStream) {
		if !strings.HasPrefix(r, "b answers ") {
			t.Errorf("stored result %q, want B's", r)
		}
	}
	waitSettled(t, js)
}

// newCutOffProcessor is a processor of chain "default" on nc answering with
// runner.
func newCutOffProcessor(t *testing.T, nc *nats.Conn, js jetstream.JetStream, runner stream.Runner, ackWait time.Duration) *stream.Processor {
	t.Helper()
	p, err := stream.NewProcessor(context.Background(), nc, js, stream.ProcessorConfig{
		Chains: map[string]stream.Runner{"default": runner}, ReplyPrefixes: []string{"_INBOX."},
		MaxPayload: 1 << 20, RequestTTL: time.Hour, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// consumeWith runs h on chain "default" with workers until the test ends.
func consumeWith(t *testing.T, js jetstream.JetStream, h stream.Handler, workers int) {
	t.Helper()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- stream.Consume(runCtx, js, h, stream.ConsumerConfig{Chains: []string{"default"}, Workers: workers, ShutdownTimeout: time.Second})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

// repliesIn counts the messages sub, of subscriber, received per subject,
// once the server has routed what each of the publishers sent it: a flush of a publisher's
// connection returns once the server has read all it sent before, and a
// flush of the subscriber's once the client has read all the server sent it
// before.
func repliesIn(t *testing.T, sub *nats.Subscription, subscriber *nats.Conn, publishers ...*nats.Conn) map[string]int {
	t.Helper()
	for _, nc := range append(publishers, subscriber) {
		if err := nc.FlushTimeout(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for {
		m, err := sub.NextMsg(100 * time.Millisecond)
		if err != nil {
			return got
		}
		got[m.Subject]++
	}
}

// subjectCounts counts the messages of stream name per subject under
// filter.
func subjectCounts(t *testing.T, js jetstream.JetStream, name, filter string) map[string]uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// readAll returns the content of every result stored in stream name.
func readAll(t *testing.T, js jetstream.JetStream, name string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			t.Fatalf("result at %d: %v", seq, err)
		}
		out = append(out, res.Content)
	}
	return out
}

// waitSettled waits until the requests stream is empty: every request was
// acknowledged or terminated.
func waitSettled(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	within(t, 10*time.Second, "every request to be settled", func() bool {
		s, err := js.Stream(context.Background(), wire.RequestsStream)
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}
