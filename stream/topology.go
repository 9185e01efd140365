package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/wire"
)

const (
	duplicateWindow = 2 * time.Minute
	deadLetterAge   = 7 * 24 * time.Hour
)

// Topology is what EnsureTopology creates.
type Topology struct {
	Chains        []string
	Replicas      int
	AckWait       time.Duration
	MaxAckPending int
	RequestTTL    time.Duration
	ResultTTL     time.Duration
}

// EnsureTopology creates or updates the streams and one durable consumer per
// chain, idempotently, so that every processor can run it at start.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, t Topology) error {
	replicas := max(t.Replicas, 1)
	subjects := make([]string, len(t.Chains))
	for i, c := range t.Chains {
		subjects[i] = wire.RequestSubject(c)
	}
	streams := []jetstream.StreamConfig{{
		Name:        wire.RequestsStream,
		Description: "detour requests, one subject per chain",
		Subjects:    subjects,
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      t.RequestTTL,
		Duplicates:  min(duplicateWindow, t.RequestTTL),
		Replicas:    replicas,
	}, {
		Name:        wire.ResultsStream,
		Description: "detour results by request id",
		Subjects:    []string{wire.ResultsPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      t.ResultTTL,
		Duplicates:  min(duplicateWindow, t.ResultTTL),
		Replicas:    replicas,
	}, {
		Name:        wire.DeadLetterStream,
		Description: "detour dead letters with their reasons",
		Subjects:    []string{wire.DeadLetterPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      deadLetterAge,
		Replicas:    replicas,
	}}
	for _, cfg := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream: creating %s: %w", cfg.Name, err)
		}
	}
	for _, c := range t.Chains {
		_, err := js.CreateOrUpdateConsumer(ctx, wire.RequestsStream, jetstream.ConsumerConfig{
			Durable:       wire.ConsumerName(c),
			Description:   "detour processors of chain " + c,
			FilterSubject: wire.RequestSubject(c),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.AckWait,
			// Deliveries are unlimited: waiting for a cooldown must never
			// drop a request; the request's own deadline ends it.
			MaxDeliver:    -1,
			MaxAckPending: t.MaxAckPending,
			Replicas:      replicas,
		})
		if err != nil {
			return fmt.Errorf("stream: creating consumer %s: %w", wire.ConsumerName(c), err)
		}
	}
	return nil
}
