package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// TestClusterNodeLossLosesNothingAndDoesNothingTwice is the acceptance of the
// issue "Nothing lost, nothing done twice": on a three-node cluster with
// DETOUR_REPLICAS=3, the server that leads DETOUR_REQUESTS is shut down
// halfway through 2,000 requests. Every request gets exactly one result, and
// the cooldown opened before the loss is still in the bucket and in the
// processors' mirrors (the cooling provider is never called again).
func TestClusterNodeLossLosesNothingAndDoesNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster and runs 2,000 requests")
	}
	const (
		total = 2000
		// window bounds requests published ahead of their results, so that
		// publishing is still going on when the node is lost.
		window = 200
	)
	ok := providertest.New(providertest.OpenAI, providertest.OK())
	defer ok.Close()
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer dead.Close()
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: dead, type: openai, base_url: %s, model: dead-model, max_retries: 0, failure_threshold: 1, cooldown: 10m}
  - {name: ok, type: openai, base_url: %s, model: ok-model}
chains:
  default: [dead, ok]
`, dead.URL, ok.URL))
	settings := testSettings()
	settings.Replicas = 3
	settings.Workers = 16
	// Acks sent while the consumer's leader is lost are lost with it; the
	// deliveries come back after AckWait, so keep it short.
	settings.AckWait = 5 * time.Second

	servers := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The topology exists before the processors start so that each can be
	// placed: one on the server that will be lost, one on a survivor.
	nc, js := connectCluster(t, natstest.ClusterURLs(servers))
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: file.ChainNames(), Replicas: settings.Replicas, AckWait: settings.AckWait,
		MaxAckPending: settings.MaxAckPending, ResultTTL: settings.ResultTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvstate.OpenBucket(ctx, js, settings.Replicas); err != nil {
		t.Fatal(err)
	}
	leader := natstest.StreamLeader(t, servers, wire.RequestsStream)
	var survivors []*server.Server
	for _, s := range servers {
		if s != leader {
			survivors = append(survivors, s)
		}
	}
	consumerLeader := natstest.ConsumerLeader(t, servers, wire.RequestsStream, wire.ConsumerName("default"))
	t.Logf("DETOUR_REQUESTS leader %s, consumer %s leader %s, %s leader %s, KV leader %s",
		leader.Name(), wire.ConsumerName("default"), consumerLeader.Name(),
		wire.ResultsStream, natstest.StreamLeader(t, servers, wire.ResultsStream).Name(),
		natstest.StreamLeader(t, servers, "KV_"+kvstate.Bucket).Name())

	logs := &countingHandler{counts: map[string]int{}}
	onLeader := startClusterProcessor(t, file, settings, logs, leader, survivors[0], survivors[1])
	onSurvivor := startClusterProcessor(t, file, settings, logs, survivors[0], survivors[1], leader)
	processors := []*clusterProcessor{onLeader, onSurvivor}
	for _, p := range processors {
		t.Logf("processor connected to %s", p.nc.ConnectedServerName())
	}

	// Trip the dead provider with one request: the cooldown key is written
	// to the R3 bucket before the loss.
	h := &harness{t: t, nc: nc, js: js}
	h.publish("default", request("warmup", "hello"))
	if res, _ := h.waitResult("warmup", 30*time.Second); res.Status != chain.StatusOK || res.Provider != "ok" {
		t.Fatalf("warmup: got %s from %q, want ok from ok", res.Status, res.Provider)
	}
	eventually(t, 5*time.Second, "both mirrors to see dead cooling", func() bool {
		return slices.IndexFunc(processors, func(p *clusterProcessor) bool {
			_, cooling := p.StoreForTest().Cooling("dead", time.Now())
			return !cooling
		}) < 0
	})

	results, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	// stored counts the results of this run's requests (the warmup's
	// excluded), polled from the stream state; errors during the election
	// leave it as it was.
	var stored atomic.Int64
	var progress sync.Mutex
	var lastGrowth time.Time
	var longestStall time.Duration
	monitorDone := make(chan struct{})
	go func() { // ends with ctx
		defer close(monitorDone)
		for ctx.Err() == nil {
			ictx, icancel := context.WithTimeout(ctx, time.Second)
			info, err := results.Info(ictx)
			icancel()
			if err == nil {
				n := int64(info.State.Msgs) - 1
				now := time.Now()
				progress.Lock()
				if n > stored.Load() {
					if !lastGrowth.IsZero() && stored.Load() < total {
						longestStall = max(longestStall, now.Sub(lastGrowth))
					}
					lastGrowth = now
					stored.Store(n)
				}
				progress.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-monitorDone }()

	pub := newRetryingPublisher(t, natstest.ClusterURLs(servers))
	publishDone := make(chan error, 1)
	go func() { // ends when all are published or ctx ends
		for i := range total {
			for int64(i)-stored.Load() > window {
				if ctx.Err() != nil {
					publishDone <- ctx.Err()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := pub.publish(ctx, fmt.Sprintf("r-%04d", i)); err != nil {
				publishDone <- err
				return
			}
		}
		publishDone <- nil
	}()

	started := time.Now()
	waitStored(t, ctx, &stored, total/2, "half of the results")
	atKill := stored.Load()
	progress.Lock()
	longestStall = 0 // only stalls from the loss on count
	progress.Unlock()
	natstest.Stop(leader)
	killed := time.Now()
	newLeader := natstest.StreamLeader(t, survivors, wire.RequestsStream)
	elected := time.Since(killed)
	t.Logf("stopped %s after %s with %d results; %s leads DETOUR_REQUESTS after %s",
		leader.Name(), killed.Sub(started).Round(time.Millisecond), atKill, newLeader.Name(), elected.Round(time.Millisecond))

	waitStored(t, ctx, &stored, total, "all results")
	allStored := time.Since(killed)
	if err := <-publishDone; err != nil {
		t.Fatalf("publishing: %v", err)
	}

	// Settled: nothing pending or unacknowledged is left to produce another
	// result later.
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	var cinfo *jetstream.ConsumerInfo
	eventually(t, 30*time.Second, "the consumer to settle", func() bool {
		ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
		defer icancel()
		cinfo, err = cons.Info(ictx)
		return err == nil && cinfo.NumPending == 0 && cinfo.NumAckPending == 0
	})

	// Exactly one stored result per id.
	info, err := results.Info(ctx, jetstream.WithSubjectFilter(wire.ResultsPrefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	var missing, twice []string
	for i := range total {
		id := fmt.Sprintf("r-%04d", i)
		switch n := info.State.Subjects[wire.ResultSubject(id)]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s×%d", id, n))
		}
	}
	if len(missing) > 0 || len(twice) > 0 || info.State.Msgs != total+1 {
		t.Fatalf("%d results stored for %d requests + warmup; missing %d %v; more than once %d %v",
			info.State.Msgs, total, len(missing), head(missing), len(twice), head(twice))
	}

	// Every result is an answer from ok, with dead skipped for its cooldown.
	redelivered := 0
	for res := range readResults(t, ctx, js) {
		if res.Status != chain.StatusOK || res.Provider != "ok" || len(res.Attempts) == 0 ||
			res.Attempts[0].Provider != "dead" || res.Attempts[0].Class != chain.ClassCooldown {
			if res.ID != "warmup" {
				t.Fatalf("%s: status %s from %q, attempts %+v; want ok from ok with dead skipped", res.ID, res.Status, res.Provider, res.Attempts)
			}
		}
		if res.Deliveries > 1 {
			redelivered++
		}
	}

	// The cooldown survived: in the bucket as read through a survivor, and
	// in both mirrors; dead was called only by the warmup.
	_, sjs := connectCluster(t, survivors[1].ClientURL())
	kv, err := sjs.KeyValue(ctx, kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, kvstate.CooldownKey("dead"))
	if err != nil {
		t.Fatalf("cooldown key of dead after the loss: %v", err)
	}
	var c kvstate.Cooldown
	if err := json.Unmarshal(entry.Value(), &c); err != nil || !c.Until.After(time.Now().Add(5*time.Minute)) {
		t.Fatalf("cooldown of dead after the loss: %s (%v), want until about 10m from the warmup", entry.Value(), err)
	}
	for _, p := range processors {
		if _, cooling := p.StoreForTest().Cooling("dead", time.Now()); !cooling {
			t.Fatalf("processor on %s: mirror does not report dead cooling after the loss", p.nc.ConnectedServerName())
		}
	}
	if calls := dead.Requests(); calls != 1 {
		t.Fatalf("dead received %d calls, want 1 (the warmup's; none while cooling)", calls)
	}

	progress.Lock()
	stall := longestStall
	progress.Unlock()
	t.Logf("figures: %d results for %d requests, 0 duplicates, 0 missing; leader elected in %s; longest stall without new results %s; all results %s after the loss",
		info.State.Msgs-1, total, elected.Round(time.Millisecond), stall.Round(time.Millisecond), allStored.Round(time.Millisecond))
	t.Logf("figures: %d publish retries, %d deduplicated by Nats-Msg-Id; %d results after a redelivery; consumer redelivered %d; ok provider calls %d for %d requests",
		pub.retries.Load(), pub.duplicates.Load(), redelivered, cinfo.NumRedelivered, ok.Requests(), total+1)
	for _, p := range processors {
		t.Logf("processor now on %s, reconnects %d", p.nc.ConnectedServerName(), p.nc.Stats().Reconnects)
	}
	t.Logf("processor warnings and errors: %v", logs.snapshot())
	// Stored results are deduplicated by Nats-Msg-Id, so "none twice" is
	// proven on the provider's side. A redelivery that finds the stored
	// result calls nothing; only one that comes while the first worker still
	// holds an answer it cannot store (its server is gone, AckWait ran out)
	// may pay again. So calls are bounded by requests plus redeliveries, and
	// redeliveries happen only around the loss.
	redeliveries := int(cinfo.Delivered.Consumer) - (total + 1)
	t.Logf("figures: %d deliveries for %d requests (%d redeliveries)", cinfo.Delivered.Consumer, total+1, redeliveries)
	if calls := ok.Requests(); calls > total+1+redeliveries {
		t.Fatalf("ok provider received %d calls for %d requests and %d redeliveries: some were processed twice", calls, total+1, redeliveries)
	}
	if redeliveries > 2*16 {
		t.Fatalf("%d redeliveries, more than two rounds of the processors' 16 workers each", redeliveries)
	}
}

// connectCluster connects to urls (comma-separated) with unlimited, quick
// reconnects; closed in cleanup.
func connectCluster(t *testing.T, urls string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// clusterProcessor is a running processor connected to a cluster.
type clusterProcessor struct {
	*service.Processor
	nc *nats.Conn
}

// startClusterProcessor runs a processor whose connection tries the servers
// in the order given (first is where it connects), until the test ends.
func startClusterProcessor(t *testing.T, file *config.File, settings config.Settings, logs slog.Handler, order ...*server.Server) *clusterProcessor {
	t.Helper()
	urls := make([]string, len(order))
	for i, s := range order {
		urls[i] = s.ClientURL()
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := service.New(ctx, service.Options{Settings: settings, File: file, Conn: nc, Logger: slog.New(logs)})
	if err != nil {
		cancel()
		nc.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // ends when cleanup cancels ctx
		defer close(done)
		if err := p.Run(ctx); err != nil {
			t.Errorf("processor: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		nc.Close()
	})
	return &clusterProcessor{Processor: p, nc: nc}
}

// retryingPublisher publishes requests through a leader change: a publish
// that fails is sent again with the same Nats-Msg-Id, which the stream
// deduplicates if the first one was stored after all.
type retryingPublisher struct {
	js         jetstream.JetStream
	retries    atomic.Int64
	duplicates atomic.Int64
}

func newRetryingPublisher(t *testing.T, urls string) *retryingPublisher {
	_, js := connectCluster(t, urls)
	return &retryingPublisher{js: js}
}

func (p *retryingPublisher) publish(ctx context.Context, id string) error {
	data, err := json.Marshal(request(id, "hello "+id))
	if err != nil {
		return err
	}
	for {
		msg := nats.NewMsg(wire.RequestSubject("default"))
		msg.Data = data
		msg.Header.Set(wire.HeaderMsgID, id)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := p.js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			if ack.Duplicate {
				p.duplicates.Add(1)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publishing %s: %w (last error %v)", id, ctx.Err(), err)
		}
		p.retries.Add(1)
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStored waits until stored reaches n.
func waitStored(t *testing.T, ctx context.Context, stored *atomic.Int64, n int64, what string) {
	t.Helper()
	for stored.Load() < n {
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %d of %d results stored when the test's time ran out", what, stored.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readResults yields every stored result, read with an ordered consumer.
func readResults(t *testing.T, ctx context.Context, js jetstream.JetStream) func(yield func(chain.Result) bool) {
	return func(yield func(chain.Result) bool) {
		cons, err := js.OrderedConsumer(ctx, wire.ResultsStream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, wire.ResultsStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for read := uint64(0); read < info.State.Msgs; {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			// Right after a node loss the ordered consumer may find the
			// JetStream API briefly without a responder while it recreates
			// itself; it resumes where it stopped, so read on.
			for m := range batch.Messages() {
				read++
				res, err := wire.DecodeResult(m.Data(), m.Headers())
				if err != nil {
					t.Fatalf("result %s: %v", m.Subject(), err)
				}
				if !yield(res) {
					return
				}
			}
			err = batch.Error()
			switch {
			case err == nil, errors.Is(err, nats.ErrTimeout):
			case errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil:
				time.Sleep(100 * time.Millisecond)
			default:
				t.Fatal(err)
			}
		}
	}
}

// head is the first few of ids, for a readable failure.
func head(ids []string) []string { return ids[:min(len(ids), 10)] }

// countingHandler counts the processors' warnings and errors by message, so
// that the figures of a run can say what the loss cost without thousands of
// log lines.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Level.String()+" "+r.Message]++
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}
