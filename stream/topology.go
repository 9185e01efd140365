package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/wire"
)

const (
	duplicateWindow = 2 * time.Minute
	deadLetterAge   = 7 * 24 * time.Hour
)

// Topology is what EnsureTopology creates. Its settings come from
// config.Settings, which owns their defaults; EnsureTopology refuses a
// Topology whose required fields are unset, naming the field.
type Topology struct {
	// Chains names the chains, each with a requests subject and a durable
	// consumer. Required: at least one, none empty.
	Chains []string
	// Replicas is how many copies every stream and consumer keeps (the
	// server allows 1 to 5). Zero means 1; negative is refused.
	Replicas int
	// AckWait is how long a delivery may stay unacknowledged before the
	// server delivers it again; the processor's heartbeat follows it
	// (ProcessorConfig.AckWait). Required: positive (JetStream would read
	// zero as its own default, which the processor cannot know).
	AckWait time.Duration
	// MaxAckPending is how many deliveries of one chain may be
	// unacknowledged at once, across processors. Required: positive.
	MaxAckPending int
	// RequestTTL is how long a request is kept queued, the age limit of
	// the requests stream; it also bounds its duplicate window. Required:
	// positive (zero would keep requests forever).
	RequestTTL time.Duration
	// ResultTTL is how long a result is kept in the results stream; it
	// also bounds its duplicate window. Required: positive (zero would keep
	// results forever).
	ResultTTL time.Duration
}

// check reports every field of t that is unset or out of range.
func (t Topology) check() error {
	var p problems
	chainList(&p, "Topology.Chains", t.Chains)
	if t.Replicas < 0 {
		p.add("Topology.Replicas", "must not be negative")
	}
	positive(&p, "Topology.AckWait", t.AckWait)
	positive(&p, "Topology.MaxAckPending", t.MaxAckPending)
	positive(&p, "Topology.RequestTTL", t.RequestTTL)
	positive(&p, "Topology.ResultTTL", t.ResultTTL)
	return p.err()
}

// problems collects what is wrong with a configuration, each naming its
// field: "stream: Topology.AckWait must be positive".
type problems []error

func (p *problems) add(field, what string) {
	*p = append(*p, fmt.Errorf("stream: %s %s", field, what))
}

// err joins the problems, or returns nil when there are none.
func (p problems) err() error { return errors.Join(p...) }

// positive reports field unless v is above zero.
func positive[T ~int | ~int64](p *problems, field string, v T) {
	if v <= 0 {
		p.add(field, "must be positive")
	}
}

// chainList reports a list of chain names that is empty or holds an empty
// name.
func chainList(p *problems, field string, chains []string) {
	if len(chains) == 0 {
		p.add(field, "must name at least one chain")
	}
	for i, c := range chains {
		if c == "" {
			p.add(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		}
	}
}

// EnsureTopology creates or updates the streams and one durable consumer per
// chain, idempotently, so that every processor can run it at start. It
// refuses a Topology with a required field unset before touching the
// server.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, t Topology) error {
	if err := t.check(); err != nil {
		return err
	}
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
