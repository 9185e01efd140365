package service

import (
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
	// Clock is the processor's own clock, nil meaning time.Now. Cooldowns,
	// probe leases and deadlines are judged by the NATS server's time,
	// learned as an offset from it (package serverclock), whatever it
	// says: tests set it off by minutes.
	Clock func() time.Time
	// fleetEvery spaces the fleet checks after the first (watchFleet);
	// zero means fleetEvery. Tests shorten it.
	fleetEvery time.Duration
}

// Processor is one assembled, not yet running, processor.
type Processor struct {
	opts  Options
	js    jetstream.JetStream
	store *kvstate.Store
	// clock is the NATS server's time, by which the processor judges
	// cooldowns, leases and deadlines.
	clock   *serverclock.Clock
	handler *stream.Processor
	chains  []string
	// repair recreates streams and consumers that a pull or a result
	// store finds gone; health is what those last saw, for readiness.
	repair *stream.Repairer
	health *stream.Health
	// consuming is set while Run's consume loop takes work; it makes
	// /readyz ready.
	consuming atomic.Bool
	// id names this processor in its cooldowns and its announcement.
	id string
	// kv is the provider bucket, providers the chain file's provider
	// names, own the circuits this processor may keep, known those to
	// report (the providers' and the circuits they keep now), events the
	// latest outage events: for the status page.
	kv        jetstream.KeyValue
	providers []string
	own       []string
	known     func() []string
	events    *statuspage.Events
	// keeper keeps the circuits of this processor's definitions at each
	// fleet check.
	keeper *circuitKeeper
	// conflicts and chainConflicts are what watchFleet found last.
	fleetMu        sync.Mutex
	conflicts      []fleet.Conflict
	chainConflicts []fleet.ChainConflict
}

// New creates the topology, builds the chains and loads the provider-state
// mirror: start-up I/O only, done with ctx. It runs nothing, and ctx bounds
// nothing once it returns: Run runs the processor. What New leaves open is
// the watch that Load opened, held for Run to follow the bucket from (the
// changes made meanwhile wait in it); Load comes last so that no step after
// it can fail and leave that watch open. A processor that is never run
// leaves it to the connection, which ends it when closed.
func New(ctx context.Context, opts Options) (*Processor, error) {
	opts.Logger = logs.OrDiscard(opts.Logger)
	s := opts.Settings
	js, err := jetstream.New(opts.Conn)
	if err != nil {
		return nil, fmt.Errorf("service: jetstream: %w", err)
	}
	names := opts.File.ChainNames()
	topology := stream.Topology{
		Chains: names, Replicas: s.Replicas, AckWait: s.AckWait, MaxAckPending: s.MaxAckPending, ResultTTL: s.ResultTTL,
		RequestsMaxBytes: s.RequestsMaxBytes, ResultsMaxBytes: s.ResultsMaxBytes, DeadLetterMaxBytes: s.DeadLetterMaxBytes,
		// Processors share the topology: a setting of this one's that
		// another's (or an operator's) outlasts is not applied.
		Kept: func(what string) {
			opts.Logger.Warn("a stream or consumer keeps a setting of another processor's or an operator's", "kept", what)
		},
	}
	if err := stream.EnsureTopology(ctx, js, topology); err != nil {
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
	// Each provider keeps the circuit of this processor's definition of
	// it (circuitState): its plain name's, or provider=<short fingerprint>
	// while another definition holds the name.
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
	providers := lo.Map(opts.File.Providers, func(p config.Provider, _ int) string { return p.Name })
	state := circuitState{store: store, holders: holders}
	known := func() []string { return knownCircuits(providers, state) }
	opts.Metrics.ReportStates(clock.Now, func(now time.Time) []kvstate.ProviderStatus { return store.Status(now, known()...) }, own...)
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
	repair, health := stream.NewRepairer(js, topology, opts.Logger), &stream.Health{}
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
		kv: kv, providers: providers, own: own, known: known, keeper: keeper, events: statuspage.NewEvents(keptEvents)}, nil
}

// topologyEvery is how often a running processor checks that what it
// needs of the shared topology is there: a failed pull, store or dead
// letter checks at once, but a chain's subject left out by another
// processor's update fails no pull, only the publishes to it.
const topologyEvery = 30 * time.Second

// keepTopology puts back, every topologyEvery until ctx ends, what the
// processor needs of the topology and finds gone.
func (p *Processor) keepTopology(ctx context.Context) {
	for wait.Sleep(ctx, topologyEvery) == nil {
		_ = p.repair.Ensure(ctx)
	}
}

// Run runs the processor until ctx ends, and returns once every part has.
// Its parts run in two stages (supervise.Run), whose nesting is the
// shutdown order:
//   - outside, for as long as anything inside runs: the provider-state
//     mirror, which follows the bucket (kvstate.Store.Run, which watches
//     again and recreates the bucket should it be lost), a watch of the
//     bucket that keeps the latest outage events for the status page
//     (Handler), and the clock that keeps learning the NATS server's time;
//     so requests still in flight while the consume loop drains see other
//     processors' cooldowns, judged by the server's time;
//   - inside, until ctx ends: the consume loop, which takes every chain's
//     requests and shuts down gracefully; the request/reply service
//     (ask.Serve: the micro service "detour" on detour.ask.<chain>), which
//     stops taking requests when the consume loop does, before it drains;
//     the fleet check (watchFleet), which records what this processor runs
//     and compares it with the other processors' records; and the topology
//     keeper.
//
// Should the mirror end by itself, or the service fail to start, the consume
// loop stops as if ctx had ended, and Run returns why. Call Run once.
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

// mirror follows the bucket until ctx ends; it is not meant to end before.
func (p *Processor) mirror(ctx context.Context) error {
	err := p.store.Run(ctx)
	if ctx.Err() != nil {
		return err
	}
	if err == nil {
		err = errors.New("kvstate: Run returned")
	}
	return fmt.Errorf("service: the provider-state mirror stopped following the bucket: %w", err)
}

// serveAsk serves request/reply until ctx ends.
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

// consume runs the consume loop until ctx ends and its deliveries have
// drained. The processor is ready while it takes work: not from the moment
// the stop begins, since the drain that follows takes no new work.
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

// Ready reports whether the processor takes work: Run's consume loop taking
// requests, connected to NATS, its pulls working, its last result stored
// (or none tried yet), and Run's provider-state mirror following the bucket.
// It backs /readyz. It turns false while a lost stream, consumer or bucket
// is missing and true again once it is recreated and used, and for good
// once Run begins to stop.
func (p *Processor) Ready() bool {
	return p.consuming.Load() && p.opts.Conn.IsConnected() && p.health.Err() == nil && p.store.Following()
}

// processorID names this processor in the cooldowns it opens and in what
// it announces to the others.
func processorID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	// The tail of a NUID, which differs from call to call; its head is the
	// same for every call of one process, and processors in one process
	// (tests, embedding programs) must not share an id.
	n := nuid.Next()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), n[len(n)-6:])
}

// cachedRunners is every chain as the processor runs it: behind its
// response cache when the chain file gives it one.
func cachedRunners(opts Options, built map[string]*chain.Chain, store *cache.Store, now func() time.Time) (map[string]stream.Runner, error) {
	var rules []string
	for _, p := range opts.File.Providers {
		if p.Type == config.TypeRules {
			rules = append(rules, p.Name)
		}
	}
	runners := make(map[string]stream.Runner, len(built))
	for name, c := range built {
		settings := opts.File.Cache(name)
		if !settings.On() {
			runners[name] = c
			continue
		}
		r, err := cache.New(cache.Config{
			Chain: name, Next: c, Store: store, Settings: cache.Settings{TTL: settings.TTL, StaleTTL: settings.StaleTTL},
			Providers: opts.File.Chains[name], Rules: rules, Logger: opts.Logger, Observer: opts.Metrics, Now: now,
		})
		if err != nil {
			return nil, err
		}
		runners[name] = r
	}
	return runners, nil
}
