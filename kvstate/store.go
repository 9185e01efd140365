package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/coalesce"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/internal/wait"
)

// Bucket is the KV bucket that holds provider state.
const Bucket = topology.ProviderBucket

// maxCASRetries bounds compare-and-set retries under contention: each
// conflict is another processor's write gone through.
const maxCASRetries = 16

// OpenBucket creates or updates the provider bucket idempotently
// (topology.OpenBucket).
func OpenBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := topology.OpenBucket(ctx, js, Bucket, replicas)
	if err != nil {
		return nil, fmt.Errorf("kvstate: %w", err)
	}
	return kv, nil
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// ID names this processor in the "by" of what it writes; a read-only
	// store needs none.
	ID     string
	Now    func() time.Time // the clock; nil means time.Now
	Logger *slog.Logger     // watches lost and found, unreadable values; nil discards
	// OnCooldown, if set, is called for each cooldown this store opens.
	OnCooldown func(provider string, c Cooldown)
	// Replicas is the bucket's replica count when this store recreates it;
	// zero means 1.
	Replicas int
}

// Store is a processor's view of the bucket: a mirror fed by a watcher plus
// the writes of state transitions. It implements chain.State.
type Store struct {
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	conn *nats.Conn // js's connection, whose reconnects end a watch; nil without js
	opts Options

	mu sync.RWMutex
	m  *mirror
	// loading is the mirror a reload is filling, nil when none runs; this
	// store's own writes go to it too, so the swap loses none.
	loading *mirror
	writing sync.Map // provider -> one-slot channel, see writeSlot

	following atomic.Bool
	// recheck asks the watch to check the bucket now: a write found it gone
	// or newer than the mirror.
	recheck  chan struct{}
	recreate coalesce.Gate               // one re-creation for every writer at once
	loaded   atomic.Pointer[bucketWatch] // the watch Load opened, for Run to follow
}

var _ chain.State = (*Store)(nil)

// New returns a Store on kv, the bucket OpenBucket opened through js; call
// Load and Run before using it. js replaces keys with a TTL atomically
// (which KeyValue cannot) and recreates the bucket if it is deleted; nil
// for a store that only reads (status, watch).
func New(js jetstream.JetStream, kv jetstream.KeyValue, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Logger = logs.OrDiscard(opts.Logger)
	s := &Store{js: js, kv: kv, opts: opts, m: newMirror(),
		recheck: make(chan struct{}, 1), recreate: coalesce.Gate{Every: recreateEvery, Timeout: recreateTimeout}}
	if js != nil {
		s.conn = js.Conn()
	}
	return s
}

// apply folds one entry from the watcher into the mirror.
func (s *Store) apply(e jetstream.KeyValueEntry) {
	if e == nil {
		return
	}
	provider, _, _ := strings.Cut(e.Key(), ".")
	logActs := s.operatorActs(provider)
	s.applyTo(func() *mirror { return s.m }, e)
	logActs()
}

// applyTo folds e into the mirror that target returns under s.mu, and logs
// a value that does not decode or breaks its rules, once per revision.
func (s *Store) applyTo(target func() *mirror, e jetstream.KeyValueEntry) {
	s.mu.Lock()
	err := target().apply(e)
	s.mu.Unlock()
	if err != nil {
		s.opts.Logger.Warn("ignoring unreadable value", "key", e.Key(), "revision", e.Revision(), "err", err)
	}
}

// keep applies one of this store's own writes, through set, to the mirror
// and to the one a reload is filling. A write the mirror does not take may
// be of a bucket since deleted: the watch checks.
func (s *Store) keep(set func(*mirror) bool) {
	s.mu.Lock()
	taken := set(s.m)
	if s.loading != nil {
		set(s.loading)
	}
	s.mu.Unlock()
	if !taken {
		s.checkSoon()
	}
}

// Cooling reports whether provider has a cooldown that has not ended at now,
// and when it ends, from the mirror. The stored until counts, not the key's
// presence, so a cooldown ends on time even if the expiry marker is late;
// the trip recorded in the health counts as much as the cooldown key, which
// may come later or be lost; a key the last reset ended counts for nothing.
func (s *Store) Cooling(provider string, now time.Time) (time.Time, bool) {
	until := coolingUntil(s.view(provider))
	if !now.Before(until) {
		return time.Time{}, false
	}
	return until, true
}

// coolingUntil is the later end of h's last trip and of c.
func coolingUntil(h Health, c *Cooldown) time.Time {
	until := tripEnd(h, chain.CooldownPolicy{})
	if c != nil && c.Until.After(until) {
		return c.Until
	}
	return until
}

// view returns provider's mirrored health and its cooldown key, nil when
// there is none or the last reset ended it, as one read of the mirror.
func (s *Store) view(provider string) (Health, *Cooldown) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.m.health[provider].value
	c, ok := s.m.cooldowns[provider]
	if !ok || resetEnds(c.value, h) {
		return h, nil
	}
	return h, &c.value
}

// Health returns the mirrored health of provider.
func (s *Store) Health(provider string) (Health, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.m.health[provider]
	return h.value, ok
}

// RecordFailure counts a failure with compare-and-set and opens a cooldown
// when it trips the provider. A call begun before the operator's last reset
// is not counted (predatesReset).
func (s *Store) RecordFailure(ctx context.Context, provider string, f chain.Failure) error {
	if f.At.IsZero() {
		f.At = s.opts.Now()
	}
	var trip time.Duration
	var next Health
	err := s.updateHealth(ctx, provider, func(h Health) (Health, bool) {
		if predatesReset(h, f) {
			trip = 0
			return h, false
		}
		running, _ := s.Cooling(provider, f.At)
		next, trip = afterFailure(h, f, running)
		return next, true
	})
	if err != nil || trip == 0 {
		return err
	}
	_, err = s.openCooldown(ctx, provider, Cooldown{Until: utc(f.At.Add(trip)), Class: f.Class, Reason: truncate(f.Error),
		Trip: next.Trips, DurationS: int64(trip / time.Second), By: s.opts.ID}, trip)
	return err
}

// RecordSuccess resets the failure count and closes a half-open circuit;
// with nothing to reset, as for healthy traffic, it writes nothing.
func (s *Store) RecordSuccess(ctx context.Context, provider string) error {
	now := s.opts.Now()
	if h, ok := s.Health(provider); !ok || !succeeding(h, now) {
		return nil
	}
	closed := false // set by the last try of change
	err := s.updateHealth(ctx, provider, func(h Health) (Health, bool) {
		closed = false
		if !succeeding(h, now) {
			return h, false
		}
		closed = halfOpen(h)
		h.ConsecutiveFailures = 0
		h.LastSuccess = utc(s.opts.Now())
		return h, true
	})
	if err == nil && closed {
		s.opts.Logger.Info("provider answered after its cooldown; circuit closed", "provider", provider)
	}
	return err
}

// succeeding reports whether a success at now changes h: it has failures
// to reset, or it is half-open with the trip's cooldown ended (an
// operator's trip counts no failure, and its probe must close the circuit).
// A success while the cooldown runs, of a call begun before, closes
// nothing: the provider is still probed when it ends.
func succeeding(h Health, now time.Time) bool {
	return h.ConsecutiveFailures > 0 || halfOpen(h) && !tripRunning(h, chain.CooldownPolicy{}, now)
}

// updateHealth applies change to the provider's health with compare-and-set.
// The mirror's value is the first guess; after a conflict the server's value
// replaces it (refreshHealth) and change is applied again. A bucket found
// gone is recreated, once, so that a failure is not lost with it.
func (s *Store) updateHealth(ctx context.Context, provider string, change func(Health) (Health, bool)) error {
	key := HealthKey(provider)
	release, err := s.writeSlot(ctx, provider)
	if err != nil {
		return err
	}
	defer release()
	s.mu.RLock()
	cur := s.m.health[provider]
	s.mu.RUnlock()
	recreated := false
	for attempt := range maxCASRetries {
		next, write := change(cur.value)
		if !write {
			return nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("kvstate: encoding %s: %w", key, err)
		}
		var rev uint64
		if cur.rev == 0 {
			rev, err = s.kv.Create(ctx, key, data)
		} else {
			rev, err = s.kv.Update(ctx, key, data, cur.rev)
		}
		switch {
		case err == nil:
			s.keep(func(m *mirror) bool { return m.health.set(provider, next, rev) })
			return nil
		case topology.Gone(err) && !recreated:
			recreated = true
			if err := s.recreateBucket(ctx); err != nil {
				return fmt.Errorf("kvstate: writing %s: %w", key, err)
			}
		case casConflict(err):
			if err := casPause(ctx, attempt); err != nil {
				return fmt.Errorf("kvstate: writing %s: %w", key, err)
			}
		default:
			return fmt.Errorf("kvstate: writing %s: %w", key, err)
		}
		if cur, err = s.fetchHealth(ctx, provider); err != nil {
			return err
		}
		// A conflict may be how this processor learns of an operator's
		// reset first: the watch then brings a revision it holds already.
		logActs := s.operatorActs(provider)
		if s.refreshHealth(provider, cur) {
			// Read again: the watcher's newer value comes back, a deleted
			// bucket's does not.
			if again, err := s.fetchHealth(ctx, provider); err == nil && again.rev != 0 {
				s.keep(func(m *mirror) bool { return m.health.set(provider, again.value, again.rev) })
			}
		}
		logActs()
	}
	return fmt.Errorf("kvstate: writing %s: %d compare-and-set conflicts in a row", key, maxCASRetries)
}

// casConflict reports whether a compare-and-set failed because the key is
// not at the revision expected (written by another, or gone).
func casConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// writeSlot serialises this store's health writes for one provider, lest
// workers that all fail at once race for one revision and drop failures.
func (s *Store) writeSlot(ctx context.Context, provider string) (release func(), err error) {
	v, ok := s.writing.Load(provider)
	if !ok {
		v, _ = s.writing.LoadOrStore(provider, make(chan struct{}, 1))
	}
	slot := v.(chan struct{})
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("kvstate: writing %s: %w", HealthKey(provider), context.Cause(ctx))
	}
}

// casPause waits before compare-and-set retry n (from 0) a random time up
// to 1ms·2^n, at most 100ms, out of step with the winner's next write.
func casPause(ctx context.Context, n int) error {
	return wait.Sleep(ctx, rand.N(min(time.Millisecond<<min(n, 7), 100*time.Millisecond)))
}

func (s *Store) fetchHealth(ctx context.Context, provider string) (versioned[Health], error) {
	e, err := s.kv.Get(ctx, HealthKey(provider))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return versioned[Health]{}, nil
	case err != nil:
		return versioned[Health]{}, fmt.Errorf("kvstate: reading %s: %w", HealthKey(provider), err)
	}
	h, err := decode[Health](e.Value())
	if err != nil {
		// An unreadable value is overwritten rather than blocking every write.
		s.opts.Logger.Warn("overwriting unreadable health value", "key", e.Key(), "err", err)
		h = Health{}
	}
	return versioned[Health]{value: h, rev: e.Revision()}, nil
}
