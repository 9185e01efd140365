package topology

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/wire"
)

const (
	duplicateWindow = 2 * time.Minute
	deadLetterAge   = 7 * 24 * time.Hour
)

// Streams is what Ensure creates: detour's requests, results and
// dead-letter streams and one durable consumer per chain, with
// config.Settings' defaults. Ensure refuses a required field unset, naming
// it.
type Streams struct {
	// Chains names the chains, each with a requests subject and a durable
	// consumer. Required: at least one, none empty.
	Chains []string
	// Replicas is how many copies every stream and consumer keeps (1 to 5).
	// Zero means 1.
	Replicas int
	// AckWait is how long a delivery may stay unacknowledged before it is
	// delivered again (stream.ProcessorConfig.AckWait). Required: positive, as
	// JetStream would read zero as its own default.
	AckWait time.Duration
	// MaxAckPending is how many deliveries of one chain may be
	// unacknowledged at once, across processors. Required: positive.
	MaxAckPending int
	// ResultTTL is how long a result is kept; it bounds the duplicate
	// window too. Required: positive.
	ResultTTL time.Duration
	// RequestsMaxBytes, ResultsMaxBytes and DeadLetterMaxBytes bound each
	// stream, in bytes, reserved in the server's store at creation. Full,
	// the requests stream refuses new requests, so that those queued keep
	// room for their results and dead letters; the results stream drops its
	// oldest; the dead-letter stream refuses new ones, whose requests stay
	// queued. Zero means no bound.
	RequestsMaxBytes, ResultsMaxBytes, DeadLetterMaxBytes int64
	// Kept, if set, is told of each setting the server keeps a larger value
	// of, set by another processor or an operator.
	Kept func(what string)
}

// check reports every field of s that is unset or out of range, each
// naming its field: "topology: Streams.AckWait must be positive".
func (s Streams) check() error {
	var errs []error
	bad := func(field, what string) { errs = append(errs, fmt.Errorf("topology: Streams.%s %s", field, what)) }
	if len(s.Chains) == 0 {
		bad("Chains", "must name at least one chain")
	}
	for i, c := range s.Chains {
		if c == "" {
			bad(fmt.Sprintf("Chains[%d]", i), "must not be empty")
		}
	}
	for _, f := range []struct {
		name     string
		v        int64
		positive bool
	}{
		{"Replicas", int64(s.Replicas), false},
		{"AckWait", int64(s.AckWait), true}, {"MaxAckPending", int64(s.MaxAckPending), true}, {"ResultTTL", int64(s.ResultTTL), true},
		{"RequestsMaxBytes", s.RequestsMaxBytes, false}, {"ResultsMaxBytes", s.ResultsMaxBytes, false}, {"DeadLetterMaxBytes", s.DeadLetterMaxBytes, false},
	} {
		switch {
		case f.positive && f.v <= 0:
			bad(f.name, "must be positive")
		case f.v < 0:
			bad(f.name, "must not be negative")
		}
	}
	return errors.Join(errs...)
}

// Ensure creates or updates the streams and one durable consumer per
// chain, idempotently, so that every processor runs it at start. It refuses
// bad Streams before touching the server.
//
// Processors share what it builds and may run different chains or settings
// (a restart with new ones, a canary): an update takes away nothing another
// relies on. The requests stream keeps the subjects of chains a processor
// serves (served); each keeps the longer age limit, the larger byte limit,
// AckWait and MaxAckPending, the more replicas, and what an operator set
// that t does not. Shortening is left to an operator (`nats stream edit`).
// Two processors updating at once can leave out a chain of one: its
// Repairer puts it back.
func Ensure(ctx context.Context, js jetstream.JetStream, t Streams) error {
	if err := t.check(); err != nil {
		return err
	}
	replicas := max(t.Replicas, 1)
	// The requests stream has no age limit: a request leaves only with its
	// result or dead letter stored, and a processor expires it at its
	// deadline. An age limit would lose without a trace a request whose
	// result and dead letter cannot be stored (a full store).
	streams := []jetstream.StreamConfig{{
		Name:        wire.RequestsStream,
		Description: "detour requests, one subject per chain",
		Subjects:    lo.Map(t.Chains, func(c string, _ int) string { return wire.RequestSubject(c) }),
		Retention:   jetstream.WorkQueuePolicy,
		MaxBytes:    t.RequestsMaxBytes,
		Discard:     jetstream.DiscardNew,
		Replicas:    replicas,
	}, {
		Name:        wire.ResultsStream,
		Description: "detour results by request id",
		Subjects:    []string{wire.ResultsPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      t.ResultTTL,
		MaxBytes:    t.ResultsMaxBytes,
		Discard:     jetstream.DiscardOld,
		Replicas:    replicas,
	}, {
		Name:        wire.DeadLetterStream,
		Description: "detour dead letters with their reasons",
		Subjects:    []string{wire.DeadLetterPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      deadLetterAge,
		MaxBytes:    t.DeadLetterMaxBytes,
		Discard:     jetstream.DiscardNew,
		Replicas:    replicas,
	}}
	for _, cfg := range streams {
		keep := func(string) bool { return true }
		if cfg.Name == wire.RequestsStream {
			keep = func(subject string) bool { return served(ctx, js, subject) }
		}
		if err := ensureStream(ctx, js, cfg, keep, t.kept); err != nil {
			return fmt.Errorf("topology: creating %s: %w", cfg.Name, noRoom(err, cfg))
		}
	}
	for _, c := range t.Chains {
		err := ensureConsumer(ctx, js, jetstream.ConsumerConfig{
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
		}, t.kept)
		if err != nil {
			return fmt.Errorf("topology: creating consumer %s: %w", wire.ConsumerName(c), err)
		}
	}
	return nil
}

func (t Streams) kept(format string, args ...any) {
	if t.Kept != nil {
		t.Kept(fmt.Sprintf(format, args...))
	}
}

// ensureStream creates the stream want describes or updates what detour
// sets of it, as Ensure says; keep says which other subjects stay.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, keep func(subject string) bool,
	kept func(string, ...any)) error {
	for range 2 { // a second round when another processor created it meanwhile
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			want.Duplicates = duplicatesFor(want.MaxAge)
			_, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		cur := s.CachedInfo().Config
		cfg := cur
		cfg.Description, cfg.Retention = want.Description, want.Retention
		cfg.Subjects = slices.Concat(want.Subjects, lo.Filter(cur.Subjects, func(subject string, _ int) bool {
			return !slices.Contains(want.Subjects, subject) && keep(subject)
		}))
		if lo.ElementsMatch(cfg.Subjects, cur.Subjects) {
			cfg.Subjects = cur.Subjects // the same set: no update for its order
		}
		cfg.MaxAge = longerAge(cur.MaxAge, want.MaxAge)
		if cfg.MaxAge != want.MaxAge {
			kept("%s keeps its age limit of %s, longer than this processor's %s", want.Name, ageText(cfg.MaxAge), want.MaxAge)
		}
		cfg.Duplicates = duplicatesFor(cfg.MaxAge)
		cfg.MaxBytes = largerBytes(cur.MaxBytes, want.MaxBytes)
		if cfg.MaxBytes != want.MaxBytes && want.MaxBytes > 0 {
			kept("%s keeps its limit of %d bytes, more than this processor's %d", want.Name, cfg.MaxBytes, want.MaxBytes)
		}
		if want.MaxBytes > 0 {
			// A requests stream that discarded its oldest when full would
			// lose requests, a dead-letter stream its dead letters.
			cfg.Discard = want.Discard
		}
		cfg.Replicas = max(cur.Replicas, want.Replicas)
		if cfg.Replicas != want.Replicas {
			kept("%s keeps its %d replicas, more than this processor's %d", want.Name, cfg.Replicas, want.Replicas)
		}
		if reflect.DeepEqual(cfg, cur) {
			return nil
		}
		_, err = js.UpdateStream(ctx, cfg)
		return err
	}
	return fmt.Errorf("created and deleted again while being set up")
}

// duplicatesFor is duplicateWindow, but never longer than maxAge (zero:
// none), which the server refuses.
func duplicatesFor(maxAge time.Duration) time.Duration {
	if maxAge > 0 {
		return min(duplicateWindow, maxAge)
	}
	return duplicateWindow
}

// ensureConsumer creates the consumer want describes or updates what
// detour sets of it, as Ensure says.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, want jetstream.ConsumerConfig, kept func(string, ...any)) error {
	c, err := js.Consumer(ctx, wire.RequestsStream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		_, err = js.CreateConsumer(ctx, wire.RequestsStream, want)
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return err
		}
		// Another processor created it meanwhile: merge with its settings.
		c, err = js.Consumer(ctx, wire.RequestsStream, want.Durable)
	}
	if err != nil {
		return err
	}
	cur := c.CachedInfo().Config
	cfg := cur
	cfg.Description, cfg.FilterSubject, cfg.AckPolicy, cfg.MaxDeliver = want.Description, want.FilterSubject, want.AckPolicy, want.MaxDeliver
	cfg.BackOff = nil // it would skew NakWithDelay's delays (docs/failures.md, "When no provider answers")
	cfg.AckWait = max(cur.AckWait, want.AckWait)
	if cfg.AckWait != want.AckWait {
		kept("consumer %s keeps its AckWait of %s, longer than this processor's %s: this processor's heartbeats come more often than needed",
			want.Durable, cfg.AckWait, want.AckWait)
	}
	cfg.MaxAckPending = max(cur.MaxAckPending, want.MaxAckPending)
	if cfg.MaxAckPending != want.MaxAckPending {
		kept("consumer %s keeps its MaxAckPending of %d, more than this processor's %d", want.Durable, cfg.MaxAckPending, want.MaxAckPending)
	}
	cfg.Replicas = max(cur.Replicas, want.Replicas)
	if cfg.Replicas != want.Replicas {
		kept("consumer %s keeps its %d replicas, more than this processor's %d", want.Durable, cfg.Replicas, want.Replicas)
	}
	if reflect.DeepEqual(cfg, cur) {
		return nil
	}
	_, err = js.UpdateConsumer(ctx, wire.RequestsStream, cfg)
	return err
}

// served reports whether a processor serves the chain of a requests
// subject: its consumer has a pull waiting or a delivery unacknowledged.
// A subject nobody serves is left out, so that a publish to it fails at
// once (docs/README.md); one whose processor is between two pulls is put
// back by its Repairer.
func served(ctx context.Context, js jetstream.JetStream, subject string) bool {
	chainName, ok := strings.CutPrefix(subject, wire.RequestsPrefix)
	if !ok {
		return true // not a chain's: someone else's, left alone
	}
	c, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(chainName))
	if err != nil {
		return !errors.Is(err, jetstream.ErrConsumerNotFound)
	}
	info := c.CachedInfo()
	return info.NumWaiting > 0 || info.NumAckPending > 0
}

// largerBytes is want where the stream has no byte limit (cur 0 or -1, an
// older processor's), else the larger; want 0 leaves cur.
func largerBytes(cur, want int64) int64 {
	if cur <= 0 && want <= 0 {
		return cur
	}
	return max(cur, want)
}

// noRoom says what to do when err is the server's refusal to reserve a
// stream's byte limit in its store.
func noRoom(err error, cfg jetstream.StreamConfig) error {
	var apiErr *jetstream.APIError
	if cfg.MaxBytes > 0 && errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStorageResourcesExceeded {
		return fmt.Errorf("%w: the server's JetStream store has no room to reserve the %d bytes of %s "+
			"(DETOUR_REQUESTS_MAX_BYTES, DETOUR_RESULTS_MAX_BYTES and DETOUR_DEADLETTER_MAX_BYTES are reserved together); "+
			"lower them, or give the server a larger store (max_file_store)", err, cfg.MaxBytes, cfg.Name)
	}
	return err
}

// jsErrStorageResourcesExceeded is JSStorageResourcesExceededErr of
// nats-server's errors.json.
const jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047

// longerAge is the longer of two age limits, zero (no limit) being the
// longest.
func longerAge(a, b time.Duration) time.Duration {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

func ageText(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}
