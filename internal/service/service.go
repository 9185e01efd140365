package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/metrics"
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
}

// Processor is one assembled, not yet running, processor.
type Processor struct {
	opts    Options
	js      jetstream.JetStream
	store   *kvstate.Store
	handler *stream.Processor
	chains  []string
	// repair recreates streams and consumers that a pull or a result
	// store finds gone; health is what those last saw, for readiness.
	repair *stream.Repairer
	health *stream.Health
	// consuming is set while Run's consume loop runs; it makes /readyz ready.
	consuming atomic.Bool
}

// New creates the topology, loads the provider-state mirror and builds the
// chains. The mirror follows the bucket (kvstate.Store.Run, which re-watches
// and recreates the bucket should it be lost) from New until ctx ends: it is
// live before Run, and it outlives Run's context, so that requests still in
// flight while Run drains see other processors' cooldowns.
func New(ctx context.Context, opts Options) (*Processor, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := opts.Settings
	js, err := jetstream.New(opts.Conn)
	if err != nil {
		return nil, fmt.Errorf("service: jetstream: %w", err)
	}
	names := opts.File.ChainNames()
	topology := stream.Topology{
		Chains: names, Replicas: s.Replicas, AckWait: s.AckWait, MaxAckPending: s.MaxAckPending,
		RequestTTL: s.RequestTTL, ResultTTL: s.ResultTTL,
	}
	if err := stream.EnsureTopology(ctx, js, topology); err != nil {
		return nil, err
	}
	kv, err := kvstate.OpenBucket(ctx, js, s.Replicas)
	if err != nil {
		return nil, err
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: processorID(), Logger: opts.Logger, Replicas: s.Replicas,
		OnCooldown: func(provider string, c kvstate.Cooldown) { opts.Metrics.CooldownOpened(provider, c.Class) }})
	if err := store.Load(ctx); err != nil {
		return nil, err
	}
	chains, err := BuildChains(opts.File, store, opts.HTTPClient, opts.Logger)
	if err != nil {
		return nil, err
	}
	runners := lo.MapValues(chains, func(c *chain.Chain, _ string) stream.Runner { return c })
	repair, health := stream.NewRepairer(js, topology, opts.Logger), &stream.Health{}
	handler, err := stream.NewProcessor(ctx, opts.Conn, js, stream.ProcessorConfig{
		Chains: runners, ReplyPrefixes: s.ReplyPrefixes, MaxPayload: s.MaxPayload,
		RequestTTL: s.RequestTTL, AckWait: s.AckWait, MaxInvalidDeliveries: s.MaxInvalidDeliveries,
		Logger: opts.Logger, Metrics: opts.Metrics, Repair: repair, Health: health,
	})
	if err != nil {
		return nil, err
	}
	go func() { _ = store.Run(ctx) }() // returns when ctx ends, never before
	return &Processor{opts: opts, js: js, store: store, handler: handler, chains: names, repair: repair, health: health}, nil
}

// Run consumes every chain until ctx ends, then shuts down gracefully.
func (p *Processor) Run(ctx context.Context) error {
	p.opts.Logger.Info("processing", "chains", p.chains, "workers", p.opts.Settings.Workers)
	p.consuming.Store(true)
	defer p.consuming.Store(false)
	// Not ready from the moment the stop begins: the drain that follows
	// takes no new work.
	stopReady := context.AfterFunc(ctx, func() {
		p.consuming.Store(false)
		p.opts.Logger.Info("shutting down: taking no new requests; those in flight may finish",
			"shutdown_timeout", p.opts.Settings.ShutdownTimeout, "cause", context.Cause(ctx))
	})
	defer stopReady()
	err := stream.Consume(ctx, p.js, p.handler, stream.ConsumerConfig{
		Chains: p.chains, Workers: p.opts.Settings.Workers,
		ShutdownTimeout: p.opts.Settings.ShutdownTimeout, Logger: p.opts.Logger,
		Repair: p.repair, Health: p.health,
	})
	if err == nil && ctx.Err() != nil {
		p.opts.Logger.Info("shutdown complete")
	}
	return err
}

// Ready reports whether the processor takes work: consuming, connected to
// NATS, its pulls working, its last result stored (or none tried yet), and
// its provider-state mirror following the bucket. It backs /readyz. It turns
// false while a lost stream, consumer or bucket is missing and true again
// once it is recreated and used.
func (p *Processor) Ready() bool {
	return p.consuming.Load() && p.opts.Conn.IsConnected() && p.health.Err() == nil && p.store.Following()
}

// processorID names this process in the cooldowns it opens.
func processorID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), nuid.Next()[:6])
}
