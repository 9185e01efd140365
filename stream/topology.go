package stream

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the streams and subjects of DESIGN.md §2.
const (
	RequestsStream   = "DETOUR_REQUESTS"
	ResultsStream    = "DETOUR_RESULTS"
	DeadLetterStream = "DETOUR_DEADLETTER"

	RequestsPrefix   = "detour.requests."
	ResultsPrefix    = "detour.results."
	DeadLetterPrefix = "detour.deadletter."

	duplicateWindow = 2 * time.Minute
	deadLetterAge   = 7 * 24 * time.Hour
)

// RequestSubject is where requests for chain are published.
func RequestSubject(chain string) string { return RequestsPrefix + chain }

// ResultSubject is where the result of request id is stored.
func ResultSubject(id string) string { return ResultsPrefix + id }

// IsResultSubject reports whether subject is captured by the results stream.
func IsResultSubject(subject string) bool { return strings.HasPrefix(subject, ResultsPrefix) }

// DeadLetterSubject is where a chain's dead letters go.
func DeadLetterSubject(chain string) string { return DeadLetterPrefix + chain }

// ConsumerName is the durable consumer of a chain.
func ConsumerName(chain string) string { return "detour-" + chain }

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
		subjects[i] = RequestSubject(c)
	}
	streams := []jetstream.StreamConfig{{
		Name:        RequestsStream,
		Description: "detour requests, one subject per chain",
		Subjects:    subjects,
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      t.RequestTTL,
		Duplicates:  min(duplicateWindow, t.RequestTTL),
		Replicas:    replicas,
	}, {
		Name:        ResultsStream,
		Description: "detour results by request id",
		Subjects:    []string{ResultsPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      t.ResultTTL,
		Duplicates:  min(duplicateWindow, t.ResultTTL),
		Replicas:    replicas,
	}, {
		Name:        DeadLetterStream,
		Description: "detour dead letters with their reasons",
		Subjects:    []string{DeadLetterPrefix + ">"},
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
		_, err := js.CreateOrUpdateConsumer(ctx, RequestsStream, jetstream.ConsumerConfig{
			Durable:       ConsumerName(c),
			Description:   "detour processors of chain " + c,
			FilterSubject: RequestSubject(c),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.AckWait,
			// Deliveries are unlimited: waiting for a cooldown must never
			// drop a request; the request's own deadline ends it.
			MaxDeliver:    -1,
			MaxAckPending: t.MaxAckPending,
			Replicas:      replicas,
		})
		if err != nil {
			return fmt.Errorf("stream: creating consumer %s: %w", ConsumerName(c), err)
		}
	}
	return nil
}
