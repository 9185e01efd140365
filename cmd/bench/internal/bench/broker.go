package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// benchChain is the one chain every detour run configures.
const benchChain = "default"

// broker is the NATS server of a run and the bench's connection to it.
type broker struct {
	srv *server.Server // nil for an external server
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startBroker starts an embedded server storing in dir, or connects to url
// when it is set, and refuses a server in use (refuseBusy).
func startBroker(ctx context.Context, url, dir string) (*broker, error) {
	b := &broker{url: url}
	if url == "" {
		srv, err := server.NewServer(&server.Options{
			ServerName: "detour-bench", Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: dir, NoSigs: true,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded server: %w", err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			srv.Shutdown()
			return nil, errors.New("embedded server did not start")
		}
		b.srv, b.url = srv, srv.ClientURL()
	}
	nc, err := nats.Connect(b.url, nats.Name("detour-bench"), nats.MaxReconnects(-1))
	if err != nil {
		b.close()
		return nil, fmt.Errorf("connecting to %s: %w", b.url, err)
	}
	b.nc = nc
	b.js, _ = jetstream.New(nc) // fails only on bad options
	if err := b.refuseBusy(ctx); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *broker) close() {
	if b.nc != nil {
		b.nc.Close()
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
}

// refuseBusy fails when the server already holds detour requests or results:
// a run purges them, so it must not run against a server in use.
func (b *broker) refuseBusy(ctx context.Context) error {
	for _, name := range []string{wire.RequestsStream, wire.ResultsStream} {
		s, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if n := s.CachedInfo().State.Msgs; n > 0 {
			return fmt.Errorf("%s on %s holds %d messages; the bench purges it: give it a server of its own", name, b.url, n)
		}
	}
	return nil
}

// baselineTopology creates the baseline's streams and consumer with the
// configuration of detour's.
func (b *broker) baselineTopology(ctx context.Context, maxAckPending int) error {
	p := baselinePipe
	streams := []jetstream.StreamConfig{
		{Name: p.stream, Subjects: []string{p.subject}, Retention: jetstream.WorkQueuePolicy,
			MaxBytes: defaults.RequestsMaxBytes, Discard: jetstream.DiscardNew, Duplicates: 2 * time.Minute},
		{Name: p.results, Subjects: []string{p.prefix + ">"}, Retention: jetstream.LimitsPolicy,
			MaxAge: defaults.ResultTTL, MaxBytes: defaults.ResultsMaxBytes, Duplicates: min(2*time.Minute, defaults.ResultTTL)},
	}
	for _, cfg := range streams {
		if _, err := b.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("creating %s: %w", cfg.Name, err)
		}
	}
	_, err := b.js.CreateOrUpdateConsumer(ctx, p.stream, jetstream.ConsumerConfig{
		Durable: p.consumer, FilterSubject: p.subject, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: defaults.AckWait, MaxDeliver: -1, MaxAckPending: maxAckPending,
	})
	if err != nil {
		return fmt.Errorf("creating consumer %s: %w", p.consumer, err)
	}
	return nil
}

// reset readies pipe's streams for a run: created as a processor with the
// default settings and maxAckPending would, so that requests can be queued
// before any process runs; emptied, so that the run counts only its own
// results; for detour with an empty provider bucket, so that no cooldown of
// an earlier run carries over; and the consumer paused until release, or
// not. A processor's own create-or-update of the consumer keeps the pause
// (the server does not let an update change it).
func (b *broker) reset(ctx context.Context, pipe pipeline, maxAckPending int, paused bool) error {
	if pipe.baseline {
		if err := b.baselineTopology(ctx, maxAckPending); err != nil {
			return err
		}
	} else {
		err := topology.Ensure(ctx, b.js, topology.Streams{
			Chains: []string{benchChain}, Replicas: 1, MaxAckPending: maxAckPending,
			AckWait: defaults.AckWait, ResultTTL: defaults.ResultTTL, RequestsMaxBytes: defaults.RequestsMaxBytes,
			ResultsMaxBytes: defaults.ResultsMaxBytes, DeadLetterMaxBytes: defaults.DeadLetterMaxBytes,
		})
		if err != nil {
			return err
		}
		if err := b.js.DeleteKeyValue(ctx, kvstate.Bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("deleting %s: %w", kvstate.Bucket, err)
		}
		if _, err := kvstate.OpenBucket(ctx, b.js, 1); err != nil {
			return err
		}
	}
	for _, name := range []string{pipe.stream, pipe.results} {
		s, err := b.js.Stream(ctx, name)
		if err == nil {
			err = s.Purge(ctx)
		}
		if err != nil {
			return fmt.Errorf("purging %s: %w", name, err)
		}
	}
	var err error
	if paused {
		_, err = b.js.PauseConsumer(ctx, pipe.stream, pipe.consumer, time.Now().Add(time.Hour))
	} else {
		err = b.resume(ctx, pipe)
	}
	if err != nil {
		return fmt.Errorf("pausing or resuming %s: %w", pipe.consumer, err)
	}
	return nil
}

// releaseDelay is how far ahead release sets the end of a pause.
const releaseDelay = 20 * time.Millisecond

// release ends a consumer's pause shortly and returns when it ends. It moves
// the pause's end rather than resuming: at the end of a pause the server
// serves the pull requests already waiting, while a resume leaves them
// waiting until the next pull or message arrives.
func (b *broker) release(ctx context.Context, pipe pipeline) (time.Time, error) {
	at := time.Now().Add(releaseDelay)
	if _, err := b.js.PauseConsumer(ctx, pipe.stream, pipe.consumer, at); err != nil {
		return at, fmt.Errorf("releasing %s: %w", pipe.consumer, err)
	}
	return at, nil
}

// resume ends a pause at once.
func (b *broker) resume(ctx context.Context, pipe pipeline) error {
	_, err := b.js.ResumeConsumer(ctx, pipe.stream, pipe.consumer)
	return err
}
