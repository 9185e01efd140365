package topology_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().Config
}

func consumerConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.ConsumerConfig {
	t.Helper()
	c, err := js.Consumer(context.Background(), wire.RequestsStream, name)
	if err != nil {
		t.Fatalf("consumer %s: %v", name, err)
	}
	return c.CachedInfo().Config
}

// checkTopology compares what the server holds with the documented topology (docs/state.md, docs/requests.md).
func checkTopology(t *testing.T, js jetstream.JetStream, topo topology.Streams) {
	t.Helper()
	req := streamConfig(t, js, wire.RequestsStream)
	var wantSubjects []string
	for _, c := range topo.Chains {
		wantSubjects = append(wantSubjects, "detour.requests."+c)
	}
	if got := slices.Sorted(slices.Values(req.Subjects)); !slices.Equal(got, slices.Sorted(slices.Values(wantSubjects))) {
		t.Errorf("%s subjects = %v, want %v", wire.RequestsStream, req.Subjects, wantSubjects)
	}
	if req.Retention != jetstream.WorkQueuePolicy {
		t.Errorf("%s retention = %v, want WorkQueue", wire.RequestsStream, req.Retention)
	}
	// No age limit: a request leaves only answered or dead-lettered.
	if req.MaxAge != 0 {
		t.Errorf("%s MaxAge = %v, want none", wire.RequestsStream, req.MaxAge)
	}
	if req.Duplicates != 2*time.Minute {
		t.Errorf("%s Duplicates = %v, want 2m", wire.RequestsStream, req.Duplicates)
	}
	if req.MaxBytes != bytesLimit(topo.RequestsMaxBytes) || req.Discard != jetstream.DiscardNew {
		t.Errorf("%s MaxBytes %d, discard %v; want %d, new", wire.RequestsStream, req.MaxBytes, req.Discard, bytesLimit(topo.RequestsMaxBytes))
	}

	res := streamConfig(t, js, wire.ResultsStream)
	if !slices.Equal(res.Subjects, []string{"detour.results.>"}) {
		t.Errorf("%s subjects = %v", wire.ResultsStream, res.Subjects)
	}
	if res.Retention != jetstream.LimitsPolicy || res.MaxAge != topo.ResultTTL || res.Duplicates != 2*time.Minute {
		t.Errorf("%s retention %v, MaxAge %v, Duplicates %v; want Limits, %v, 2m", wire.ResultsStream, res.Retention, res.MaxAge, res.Duplicates, topo.ResultTTL)
	}
	if res.MaxBytes != bytesLimit(topo.ResultsMaxBytes) || res.Discard != jetstream.DiscardOld {
		t.Errorf("%s MaxBytes %d, discard %v; want %d, old", wire.ResultsStream, res.MaxBytes, res.Discard, bytesLimit(topo.ResultsMaxBytes))
	}

	dl := streamConfig(t, js, wire.DeadLetterStream)
	if !slices.Equal(dl.Subjects, []string{"detour.deadletter.>"}) {
		t.Errorf("%s subjects = %v", wire.DeadLetterStream, dl.Subjects)
	}
	if dl.Retention != jetstream.LimitsPolicy || dl.MaxAge != 7*24*time.Hour {
		t.Errorf("%s retention %v, MaxAge %v; want Limits, 168h", wire.DeadLetterStream, dl.Retention, dl.MaxAge)
	}
	if dl.MaxBytes != bytesLimit(topo.DeadLetterMaxBytes) || dl.Discard != jetstream.DiscardNew {
		t.Errorf("%s MaxBytes %d, discard %v; want %d, new", wire.DeadLetterStream, dl.MaxBytes, dl.Discard, bytesLimit(topo.DeadLetterMaxBytes))
	}

	for _, c := range topo.Chains {
		cc := consumerConfig(t, js, "detour-"+c)
		if cc.Durable != "detour-"+c {
			t.Errorf("consumer of %s: durable %q", c, cc.Durable)
		}
		if cc.FilterSubject != "detour.requests."+c {
			t.Errorf("detour-%s filter = %q", c, cc.FilterSubject)
		}
		if cc.AckPolicy != jetstream.AckExplicitPolicy {
			t.Errorf("detour-%s AckPolicy = %v, want explicit", c, cc.AckPolicy)
		}
		if cc.MaxDeliver != -1 {
			t.Errorf("detour-%s MaxDeliver = %d, want -1", c, cc.MaxDeliver)
		}
		if len(cc.BackOff) != 0 {
			t.Errorf("detour-%s BackOff = %v, want none", c, cc.BackOff)
		}
		if cc.AckWait != topo.AckWait {
			t.Errorf("detour-%s AckWait = %v, want %v", c, cc.AckWait, topo.AckWait)
		}
		if cc.MaxAckPending != topo.MaxAckPending {
			t.Errorf("detour-%s MaxAckPending = %d, want %d", c, cc.MaxAckPending, topo.MaxAckPending)
		}
	}
}

// bytesLimit is a stream's MaxBytes as the server reports a Topology's
// limit: -1 for none.
func bytesLimit(limit int64) int64 {
	if limit == 0 {
		return -1
	}
	return limit
}

func TestEnsureTopology(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	topo := topology.Streams{
		Chains:        []string{"default", "cheap"},
		Replicas:      1,
		AckWait:       7 * time.Second,
		MaxAckPending: 17,
		ResultTTL:     24 * time.Hour,
		// Reserved in the server's store, which has room for them.
		RequestsMaxBytes: 8 << 20, ResultsMaxBytes: 32 << 20, DeadLetterMaxBytes: 16 << 20,
	}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatalf("first EnsureTopology: %v", err)
	}
	checkTopology(t, js, topo)

	// A publish to a configured chain is stored and deduplicated by Nats-Msg-Id.
	for i, wantDup := range []bool{false, true} {
		ack, err := js.Publish(ctx, wire.RequestSubject("default"), []byte(`{}`), jetstream.WithMsgID("dup-1"))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if ack.Stream != wire.RequestsStream || ack.Duplicate != wantDup {
			t.Errorf("publish %d: stream %q duplicate %v, want %q %v", i, ack.Stream, ack.Duplicate, wire.RequestsStream, wantDup)
		}
	}

	t.Run("idempotent", func(t *testing.T) {
		if err := topology.Ensure(ctx, js, topo); err != nil {
			t.Fatalf("second EnsureTopology: %v", err)
		}
		checkTopology(t, js, topo)
		info, err := js.Stream(ctx, wire.RequestsStream)
		if err != nil {
			t.Fatal(err)
		}
		if n := info.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("%s holds %d messages after a second run, want 1 (kept)", wire.RequestsStream, n)
		}
	})

	t.Run("adds a chain and applies new settings", func(t *testing.T) {
		grown := topo
		grown.Chains = []string{"default", "cheap", "extra"}
		grown.AckWait = 11 * time.Second
		grown.MaxAckPending = 23
		if err := topology.Ensure(ctx, js, grown); err != nil {
			t.Fatalf("EnsureTopology with a new chain: %v", err)
		}
		checkTopology(t, js, grown)
		if _, err := js.Publish(ctx, wire.RequestSubject("extra"), []byte(`{}`)); err != nil {
			t.Errorf("publish to the new chain: %v", err)
		}
	})

	t.Run("unknown chain fails at once", func(t *testing.T) {
		start := time.Now()
		_, err := js.Publish(ctx, "detour.requests.unknown", []byte(`{}`))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("publish to an unknown chain: err = %v, want ErrNoStreamResponse", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("publish to an unknown chain took %v, want an immediate failure", took)
		}
	})
}

func TestEnsureTopologyShortTTLs(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A TTL shorter than the duplicate window must not make the server
	// refuse the streams (it requires Duplicates <= MaxAge).
	topo := topology.Streams{
		Chains:        []string{"default"},
		AckWait:       time.Second,
		MaxAckPending: 1,
		ResultTTL:     time.Minute,
	}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	if d := streamConfig(t, js, wire.ResultsStream).Duplicates; d != time.Minute {
		t.Errorf("%s Duplicates = %v, want the TTL 1m", wire.ResultsStream, d)
	}
	if r := streamConfig(t, js, wire.RequestsStream).Replicas; r != 1 {
		t.Errorf("Replicas = %d, want 1 when unset", r)
	}
}

// TestEnsureTopologyKeepsWhatOtherProcessorsRelyOn: processors share the
// topology but may run other chains or settings (a canary, one restarted
// with new ones). One that starts never takes away another's chain, never
// shortens an age limit or an AckWait, never lowers MaxAckPending, and
// leaves what an operator set alone; it is told what it did not apply.
func TestEnsureTopologyKeepsWhatOtherProcessorsRelyOn(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := topology.Streams{
		Chains: []string{"default", "cheap"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: 24 * time.Hour, RequestsMaxBytes: 4 << 20, DeadLetterMaxBytes: 4 << 20,
	}
	if err := topology.Ensure(ctx, js, first); err != nil {
		t.Fatal(err)
	}
	// A processor serves both chains: a pull of each waits.
	for _, c := range first.Chains {
		waitingPull(t, js, c)
	}
	// An operator bounds the results stream.
	res := streamConfig(t, js, wire.ResultsStream)
	res.MaxMsgs, res.MaxBytes = 100_000, 10<<20
	if _, err := js.UpdateStream(ctx, res); err != nil {
		t.Fatal(err)
	}

	var kept []string
	other := topology.Streams{
		Chains: []string{"default", "other"}, Replicas: 1, AckWait: 2 * time.Second, MaxAckPending: 10,
		ResultTTL: time.Minute, RequestsMaxBytes: 2 << 20, ResultsMaxBytes: 5 << 20, DeadLetterMaxBytes: 2 << 20,
		Kept: func(what string) { kept = append(kept, what) },
	}
	if err := topology.Ensure(ctx, js, other); err != nil {
		t.Fatal(err)
	}
	req := streamConfig(t, js, wire.RequestsStream)
	if got := slices.Sorted(slices.Values(req.Subjects)); !slices.Equal(got, []string{"detour.requests.cheap", "detour.requests.default", "detour.requests.other"}) {
		t.Errorf("%s subjects %v; want every chain's", wire.RequestsStream, got)
	}
	if req.MaxBytes != 4<<20 {
		t.Errorf("%s MaxBytes %d; want the larger, %d", wire.RequestsStream, req.MaxBytes, 4<<20)
	}
	res = streamConfig(t, js, wire.ResultsStream)
	if res.MaxAge != 24*time.Hour {
		t.Errorf("%s MaxAge %v; want 24h", wire.ResultsStream, res.MaxAge)
	}
	for _, c := range first.Chains {
		if cc := consumerConfig(t, js, wire.ConsumerName(c)); cc.AckWait != 30*time.Second || cc.MaxAckPending != 100 {
			t.Errorf("%s AckWait %v, MaxAckPending %d; want 30s and 100", cc.Durable, cc.AckWait, cc.MaxAckPending)
		}
	}
	if cc := consumerConfig(t, js, wire.ConsumerName("other")); cc.AckWait != 2*time.Second || cc.MaxAckPending != 10 {
		t.Errorf("a new chain's consumer: AckWait %v, MaxAckPending %d; want its processor's 2s and 10", cc.AckWait, cc.MaxAckPending)
	}
	if res.MaxMsgs != 100_000 || res.MaxBytes != 10<<20 {
		t.Errorf("%s limits %d messages, %d bytes; want the operator's 100000 and %d", wire.ResultsStream, res.MaxMsgs, res.MaxBytes, 10<<20)
	}
	for _, what := range []string{"DETOUR_REQUESTS keeps its limit of 4194304 bytes", "DETOUR_RESULTS keeps its limit of 10485760 bytes",
		"DETOUR_RESULTS keeps its age limit of 24h0m0s",
		"consumer detour-default keeps its AckWait of 30s", "consumer detour-default keeps its MaxAckPending of 100"} {
		if !slices.ContainsFunc(kept, func(k string) bool { return strings.HasPrefix(k, what) }) {
			t.Errorf("not told %q; told %q", what, kept)
		}
	}
}

// waitingPull keeps a pull of chainName's consumer waiting until the test
// ends, as a processor serving it does.
func waitingPull(t *testing.T, js jetstream.JetStream, chainName string) {
	t.Helper()
	ctx := context.Background()
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(chainName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumWaiting > 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no pull of %s waits", chainName)
		}
	}
}

// TestEnsureTopologyLeavesOutAChainNoOneServes: the subject of a chain no
// processor serves any more (no pull waits on its consumer, nothing is
// being worked on) is left out, so that a publish to it fails at once
// rather than wait for a processor that may never come.
func TestEnsureTopologyLeavesOutAChainNoOneServes(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := topology.Streams{
		Chains: []string{"default", "retired", "elsewhere"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
	}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	waitingPull(t, js, "elsewhere")
	topo.Chains = []string{"default"}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(streamConfig(t, js, wire.RequestsStream).Subjects))
	if want := []string{"detour.requests.default", "detour.requests.elsewhere"}; !slices.Equal(got, want) {
		t.Fatalf("subjects %v, want %v: the served chain's kept, the retired one's left out", got, want)
	}
	if _, err := js.Publish(ctx, wire.RequestSubject("retired"), []byte(`{}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to the retired chain: %v, want ErrNoStreamResponse", err)
	}
}

// TestEnsureTopologyBoundsStreamsMadeWithoutLimits: streams an older
// processor made, the requests stream with an age limit (at which it
// removed a request whose result could not be stored, without a trace) and
// none bounded in bytes, are given the byte limits and their discard
// policies, and the requests stream loses its age limit.
func TestEnsureTopologyBoundsStreamsMadeWithoutLimits(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: wire.RequestsStream, Subjects: []string{wire.RequestSubject("default")}, Retention: jetstream.WorkQueuePolicy, MaxAge: time.Hour},
		{Name: wire.ResultsStream, Subjects: []string{wire.ResultsPrefix + ">"}, MaxAge: time.Hour},
		{Name: wire.DeadLetterStream, Subjects: []string{wire.DeadLetterPrefix + ">"}, MaxAge: 7 * 24 * time.Hour},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	topo := topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100, ResultTTL: time.Hour,
		RequestsMaxBytes: 2 << 20, ResultsMaxBytes: 8 << 20, DeadLetterMaxBytes: 4 << 20,
	}
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	checkTopology(t, js, topo)
}

// TestEnsureTopologySaysWhenTheStoreHasNoRoom: the server reserves each
// stream's byte limit in its store; a store too small for them stops the
// start with an error naming the settings to lower, not the server's words
// alone.
func TestEnsureTopologySaysWhenTheStoreHasNoRoom(t *testing.T) {
	_, js := natstest.Connect(t, natstest.StartWith(t, &server.Options{JetStreamMaxStore: 16 << 20}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100, ResultTTL: time.Hour,
		RequestsMaxBytes: 4 << 20, ResultsMaxBytes: 32 << 20, DeadLetterMaxBytes: 8 << 20,
	})
	if err == nil || !strings.Contains(err.Error(), "no room to reserve the 33554432 bytes of DETOUR_RESULTS") ||
		!strings.Contains(err.Error(), "DETOUR_RESULTS_MAX_BYTES") {
		t.Fatalf("EnsureTopology on a 16 MiB store: %v, want it to say the store has no room for DETOUR_RESULTS", err)
	}
}

// checkConfigErr checks err against want: nil for "", else an error that
// names every line of want.
func checkConfigErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("err = %v, want nil", err)
	case want == "":
	case err == nil:
		t.Fatalf("err = nil, want %q", want)
	default:
		for w := range strings.Lines(want) {
			if !strings.Contains(err.Error(), strings.TrimSpace(w)) {
				t.Errorf("err = %q, want it to contain %q", err, strings.TrimSpace(w))
			}
		}
	}
}

// A config refused is refused before the server is touched: the refused
// cases run without connections.

func TestTopologyValidation(t *testing.T) {
	valid := topology.Streams{
		Chains: []string{"default"}, AckWait: time.Second, MaxAckPending: 1, ResultTTL: time.Minute,
	}
	cases := []struct {
		name   string
		change func(*topology.Streams)
		want   string
	}{
		{"valid, replicas unset", func(*topology.Streams) {}, ""},
		{"no chains", func(t *topology.Streams) { t.Chains = nil }, "topology: Streams.Chains must name at least one chain"},
		{"empty chain", func(t *topology.Streams) { t.Chains = []string{"default", ""} }, "topology: Streams.Chains[1] must not be empty"},
		{"negative replicas", func(t *topology.Streams) { t.Replicas = -1 }, "topology: Streams.Replicas must not be negative"},
		{"zero ack wait", func(t *topology.Streams) { t.AckWait = 0 }, "topology: Streams.AckWait must be positive"},
		{"negative ack wait", func(t *topology.Streams) { t.AckWait = -time.Second }, "topology: Streams.AckWait must be positive"},
		{"zero max ack pending", func(t *topology.Streams) { t.MaxAckPending = 0 }, "topology: Streams.MaxAckPending must be positive"},
		{"limits", func(t *topology.Streams) {
			t.RequestsMaxBytes, t.ResultsMaxBytes, t.DeadLetterMaxBytes = 1<<20, 2<<20, 2<<20
		}, ""},
		{"negative limit", func(t *topology.Streams) { t.DeadLetterMaxBytes = -1 }, "topology: Streams.DeadLetterMaxBytes must not be negative"},
		{"zero result ttl", func(t *topology.Streams) { t.ResultTTL = 0 }, "topology: Streams.ResultTTL must be positive"},
		{"zero value", func(t *topology.Streams) { *t = topology.Streams{} }, `topology: Streams.Chains must name at least one chain
			topology: Streams.AckWait must be positive
			topology: Streams.MaxAckPending must be positive
			topology: Streams.ResultTTL must be positive`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topo := valid
			c.change(&topo)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if c.want == "" {
				_, js := natstest.Connect(t, natstest.Start(t))
				checkConfigErr(t, topology.Ensure(ctx, js, topo), "")
				return
			}
			checkConfigErr(t, topology.Ensure(ctx, nil, topo), c.want)
		})
	}
}
