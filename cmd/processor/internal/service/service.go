package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/samber/lo"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/ask"
	"github.com/detourhq/detour/cmd/processor/internal/chains"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/serverclock"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/cmd/processor/internal/supervise"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/internal/wait"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/stream"
)

// Options assemble a processor.
type Options struct {
	Settings config.Settings
	File     *config.File
	// Conn is the NATS connection to use; the caller owns it.
	Conn   *nats.Conn
	Logger *slog.Logger
	// HTTPClient calls providers; nil uses chain.DefaultHTTPClient.
	HTTPClient *http.Client
	// Metrics records what the processor does; nil records nothing.
	Metrics *metrics.Metrics
	// Clock is the processor's own clock, nil meaning time.Now; cooldowns,
	// leases and deadlines are judged by the server's time, learned as an
	// offset from it (serverclock), so tests may set it off by minutes.
	Clock func() time.Time
	// fleetEvery spaces the fleet checks; zero means fleetEvery.
	fleetEvery time.Duration
}

// Processor is one assembled, not yet running, processor.
type Processor struct {
	opts      Options
	js        jetstream.JetStream
	store     *kvstate.Store
	clock     *serverclock.Clock // the NATS server's time
	handler   *stream.Processor
	chains    []string
	repair    *topology.Repairer
	health    *stream.Health
	consuming atomic.Bool // while Run's consume loop takes work
	id        string      // names this processor in its cooldowns and record
	// For the status page and metrics: the provider bucket, the circuits
	// this processor may keep, those to report now, and the latest outage
	// events.
	kv     jetstream.KeyValue
	own    []string
	known  func() []string
	events *statuspage.Events
	keeper *circuitKeeper
	// conflicts and chainConflicts are what watchFleet found last: the
	// provider and chain names this processor and another running one
	// define differently. Each check replaces them, never changing them.
	fleetMu        sync.Mutex
	conflicts      []fleet.Conflict
	chainConflicts []fleet.ChainConflict
}

// New creates the topology, builds the chains and loads the provider-state
// mirror, with ctx bounding that start-up I/O only; Run runs the processor.
// It leaves open the watch Load opened, for Run to follow the bucket from:
// Load comes last, so that no later step can fail and leave it open.
func New(ctx context.Context, opts Options) (*Processor, error) {
	opts.Logger = logs.OrDiscard(opts.Logger)
	s := opts.Settings
	js, _ := jetstream.New(opts.Conn) // fails only on bad options
	names := opts.File.ChainNames()
	streams := topology.Streams{
		Chains: names, Replicas: s.Replicas, AckWait: s.AckWait, MaxAckPending: s.MaxAckPending, ResultTTL: s.ResultTTL,
		RequestsMaxBytes: s.RequestsMaxBytes, ResultsMaxBytes: s.ResultsMaxBytes, DeadLetterMaxBytes: s.DeadLetterMaxBytes,
		Kept: func(what string) {
			opts.Logger.Warn("a stream or consumer keeps a setting of another processor's or an operator's", "kept", what)
		},
	}
	if err := topology.Ensure(ctx, js, streams); err != nil {
		return nil, err
	}
	kv, err := kvstate.OpenBucket(ctx, js, s.Replicas)
	if err != nil {
		return nil, err
	}
	clock := serverclock.New(opts.Clock, serverclock.BucketTime(kv), opts.Logger)
	if err := clock.Sync(ctx); err != nil {
		return nil, err
	}
	id := processorID()
	// Each provider keeps its definition's circuit (circuitState).
	holders := map[string]kvstate.Holder{}
	var own []string // the circuits this processor may keep, for the metrics
	for _, p := range opts.File.Providers {
		d := fleet.Define(p)
		holders[p.Name] = kvstate.Holder{Fingerprint: d.Fingerprint, Definition: d.String(), By: id}
		own = append(own, p.Name, kvstate.DefinitionCircuit(p.Name, d.Fingerprint))
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: id, Now: clock.Now, Logger: opts.Logger, Replicas: s.Replicas,
		OnCooldown: func(circuit string, c kvstate.Cooldown) {
			opts.Metrics.CooldownOpened(kvstate.CircuitProvider(circuit), c.Class)
		}})
	keeper := &circuitKeeper{store: store, own: holders, now: clock.Now, logger: opts.Logger,
		kept: map[string]string{}, unheard: map[string]bool{}}
	state := circuitState{store: store, holders: holders}
	opts.Metrics.ReportStates(clock.Now, func(now time.Time) []kvstate.ProviderStatus { return store.Status(now, state.known()...) }, own...)
	built, err := chains.Build(opts.File, state, opts.HTTPClient, opts.Logger)
	if err != nil {
		return nil, err
	}
	for _, c := range built {
		c.Now = clock.Now
	}
	cacheStore, err := cache.Open(ctx, js, s.Replicas)
	if err != nil {
		return nil, err
	}
	runners, err := cachedRunners(opts, built, cacheStore, clock.Now)
	if err != nil {
		return nil, err
	}
	repair, health := topology.NewRepairer(js, streams, opts.Logger), &stream.Health{}
	handler, err := stream.NewProcessor(ctx, opts.Conn, js, stream.ProcessorConfig{
		Chains: runners, ReplyPrefixes: s.ReplyPrefixes, MaxPayload: s.MaxPayload,
		RequestTTL: s.RequestTTL, AckWait: s.AckWait, MaxInvalidDeliveries: s.MaxInvalidDeliveries,
		Logger: opts.Logger, Observer: opts.Metrics, Repair: repair, Health: health, Now: clock.Now,
	})
	if err != nil {
		return nil, err
	}
	if err := store.Load(ctx); err != nil { // last, see above
		return nil, err
	}
	return &Processor{opts: opts, js: js, store: store, clock: clock, handler: handler, chains: names, repair: repair, health: health, id: id,
		kv: kv, own: own, known: state.known, keeper: keeper, events: statuspage.NewEvents(keptEvents)}, nil
}

// topologyEvery is how often a running processor checks the topology: a
// failed pull or store checks at once, but a chain's subject left out by
// another processor's update fails no pull, only the publishes to it.
const topologyEvery = 30 * time.Second

func (p *Processor) keepTopology(ctx context.Context) {
	for wait.Sleep(ctx, topologyEvery) == nil {
		_ = p.repair.Ensure(ctx)
	}
}

// Run runs the processor until ctx ends, and returns once every part has,
// in two stages (supervise.Run) whose nesting is the shutdown order:
// outside, the provider-state mirror, the outage events of the status page
// and the server clock, so that requests in flight while the consume loop
// drains still see other processors' cooldowns; inside, until ctx ends,
// the consume loop, request/reply (ask.Serve), the fleet check and the
// topology keeper. Should the mirror end by itself, or the service fail to
// start, the inside stops as if ctx had ended, and Run returns why. Call
// Run once.
func (p *Processor) Run(ctx context.Context) error {
	p.opts.Logger.Info("processing", "chains", p.chains, "workers", p.opts.Settings.Workers)
	err := supervise.Run(ctx,
		[]supervise.Part{p.mirror, quiet(p.watchEvents), func(ctx context.Context) error { _ = p.clock.Run(ctx); return nil }},
		[]supervise.Part{p.consume, p.serveAsk, quiet(p.watchFleet), quiet(p.keepTopology)},
	)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		p.opts.Logger.Info("shutdown complete", "handed_back", p.handler.HandedBack())
	}
	return nil
}

// quiet is a part that never fails.
func quiet(run func(context.Context)) supervise.Part {
	return func(ctx context.Context) error { run(ctx); return nil }
}

// mirror follows the bucket until ctx ends; ending before is an error.
func (p *Processor) mirror(ctx context.Context) error {
	err := p.store.Run(ctx)
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("service: the provider-state mirror stopped following the bucket: %w", cmp.Or(err, errors.New("kvstate: Run returned")))
}

func (p *Processor) serveAsk(ctx context.Context) error {
	err := ask.Serve(ctx, ask.Config{
		Conn: p.opts.Conn, JetStream: p.js, Chains: p.chains,
		ReplyPrefixes: p.opts.Settings.ReplyPrefixes, MaxPayload: p.opts.Settings.MaxPayload,
		Logger: p.opts.Logger, Metadata: map[string]string{"processor": p.id},
	})
	if err != nil {
		return fmt.Errorf("service: request/reply: %w", err)
	}
	return nil
}

// consume runs the consume loop until ctx ends and it has drained; the
// processor is ready while it takes work, not once the stop begins.
func (p *Processor) consume(ctx context.Context) error {
	p.consuming.Store(true)
	defer p.consuming.Store(false)
	stopReady := context.AfterFunc(ctx, func() {
		p.consuming.Store(false)
		p.opts.Logger.Info("shutting down: taking no new requests; those in flight may finish",
			"shutdown_timeout", p.opts.Settings.ShutdownTimeout, "cause", context.Cause(ctx))
	})
	defer stopReady()
	return stream.Consume(ctx, p.js, p.handler, stream.ConsumerConfig{
		Chains: p.chains, Workers: p.opts.Settings.Workers,
		ShutdownTimeout: p.opts.Settings.ShutdownTimeout, Logger: p.opts.Logger,
		Repair: p.repair, Health: p.health,
	})
}

// Ready backs /readyz: the consume loop taking requests, connected to NATS,
// its pulls working, its last result stored (or none tried yet), and the
// mirror following the bucket.
func (p *Processor) Ready() bool {
	return p.consuming.Load() && p.opts.Conn.IsConnected() && p.health.Err() == nil && p.store.Following()
}

// processorID names this processor in its cooldowns and its record.
func processorID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	// A NUID's tail, as its head is the same for every call of a process,
	// and processors in one process (tests) must not share an id.
	n := nuid.Next()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), n[len(n)-6:])
}

// cachedRunners is every chain, behind its response cache when it has one.
func cachedRunners(opts Options, built map[string]*chain.Chain, store *cache.Store, now func() time.Time) (map[string]stream.Runner, error) {
	rules := lo.FilterMap(opts.File.Providers, func(p config.Provider, _ int) (string, bool) { return p.Name, p.Type == config.TypeRules })
	runners := make(map[string]stream.Runner, len(built))
	for name, c := range built {
		settings := opts.File.Cache(name)
		if !settings.On() {
			runners[name] = c
			continue
		}
		r, err := cache.New(cache.Config{
			Chain: name, Next: c, Store: store, Settings: settings,
			Providers: opts.File.Chains[name], Rules: rules, Logger: opts.Logger, Observer: opts.Metrics, Now: now,
		})
		if err != nil {
			return nil, err
		}
		runners[name] = r
	}
	return runners, nil
}
