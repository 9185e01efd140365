package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
)

// Bucket is the KV bucket that holds provider state.
const Bucket = "detour_providers"

// markerTTL is how long the bucket keeps the marker of an expired key; it is
// what lets watchers see cooldowns end.
const markerTTL = 5 * time.Minute

// maxCASRetries bounds compare-and-set retries under contention. Each
// conflict means another processor's write went through, so with writes
// serialised within a processor and a jittered pause between retries, this
// is only reached by many processors hammering one provider at once.
const maxCASRetries = 16

// OpenBucket creates or updates the provider bucket idempotently.
func OpenBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         Bucket,
		Description:    "detour provider health and cooldowns",
		History:        1,
		LimitMarkerTTL: markerTTL,
		Replicas:       max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kvstate: opening bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// ID names this processor in the cooldowns it opens (the "by" field).
	ID string
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// OnCooldown, if set, is called for each cooldown this store opens.
	OnCooldown func(provider string, c Cooldown)
}

// Store is a processor's view of the bucket: a mirror fed by a watcher plus
// the writes of state transitions. It implements chain.State.
type Store struct {
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	opts Options

	mu        sync.RWMutex
	health    mirrorMap[Health]
	cooldowns mirrorMap[Cooldown]
	probes    mirrorMap[Probe]
	// held maps a provider to the revision of the probe lease this store
	// created and has not released.
	held map[string]uint64

	// writing holds a one-slot channel per provider that serialises this
	// store's health writes (see writeSlot).
	writing sync.Map
}

var _ chain.State = (*Store)(nil)

// New returns a Store on kv, the bucket OpenBucket opened through js; call
// Start before using it. js replaces a cooldown key atomically (a publish
// with an expected revision and a per-message TTL, which KeyValue lacks); it
// may be nil for a store that only reads (status, watch).
func New(js jetstream.JetStream, kv jetstream.KeyValue, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Store{js: js, kv: kv, opts: opts, health: mirrorMap[Health]{}, cooldowns: mirrorMap[Cooldown]{},
		probes: mirrorMap[Probe]{}, held: map[string]uint64{}}
}

// Start loads the bucket into the mirror and returns once it holds every
// current value. The watcher goroutine it starts keeps the mirror current and
// ends when ctx ends.
func (s *Store) Start(ctx context.Context) error {
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("kvstate: watching %s: %w", Bucket, err)
	}
	for e := range w.Updates() {
		if e == nil { // end of the initial values
			go s.follow(ctx, w)
			return nil
		}
		s.apply(e)
	}
	return fmt.Errorf("kvstate: watcher of %s closed before the initial values: %w", Bucket, context.Cause(ctx))
}

func (s *Store) follow(ctx context.Context, w jetstream.KeyWatcher) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				s.apply(e)
			}
		}
	}
}

// apply folds one bucket entry into the mirror, ignoring entries older than
// what the mirror holds (the processor's own writes may arrive first).
func (s *Store) apply(e jetstream.KeyValueEntry) {
	provider, kind, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	switch kind {
	case SuffixHealth:
		err = s.health.apply(provider, e)
	case SuffixCooldown:
		err = s.cooldowns.apply(provider, e)
	case SuffixProbe:
		err = s.probes.apply(provider, e)
	}
	if err != nil {
		s.opts.Logger.Warn("ignoring unreadable value", "key", e.Key(), "err", err)
	}
}

// Cooling reports whether provider has a cooldown that has not ended at now,
// and when it ends. It reads the mirror only. The stored until is checked as
// well as the key's presence, so a cooldown ends on time even if the expiry
// marker is late; and the trip recorded in the health value counts as much as
// the cooldown key, so a processor that sees the health write first (or a
// key that was lost) still skips the provider.
func (s *Store) Cooling(provider string, now time.Time) (time.Time, bool) {
	s.mu.RLock()
	c, hasKey := s.cooldowns[provider]
	h := s.health[provider]
	s.mu.RUnlock()
	until := tripEnd(h.value, chain.CooldownPolicy{})
	if hasKey && c.value.Until.After(until) {
		until = c.value.Until
	}
	if !now.Before(until) {
		return time.Time{}, false
	}
	return until, true
}

// EarliestReopen returns the earliest end of the running cooldowns among
// providers, or the zero time when none of them is cooling.
func (s *Store) EarliestReopen(providers []string) time.Time {
	now := s.opts.Now()
	var earliest time.Time
	for _, p := range providers {
		if until, ok := s.Cooling(p, now); ok && (earliest.IsZero() || until.Before(earliest)) {
			earliest = until
		}
	}
	return earliest
}

// Health returns the mirrored health of provider.
func (s *Store) Health(provider string) (Health, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.health[provider]
	return h.value, ok
}

// Cooldown returns the mirrored cooldown of provider, if a key is present.
func (s *Store) Cooldown(provider string) (Cooldown, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.cooldowns[provider]
	return c.value, ok
}

// RecordFailure counts a failure with compare-and-set and opens a cooldown
// when it trips the provider.
func (s *Store) RecordFailure(ctx context.Context, provider string, f chain.Failure) error {
	if f.At.IsZero() {
		f.At = s.opts.Now()
	}
	var trip time.Duration
	var next Health
	err := s.updateHealth(ctx, provider, func(h Health) (Health, bool) {
		running, _ := s.Cooling(provider, f.At)
		next, trip = afterFailure(h, f, running)
		return next, true
	})
	if err != nil || trip == 0 {
		return err
	}
	return s.openCooldown(ctx, provider, Cooldown{
		Until:     utc(f.At.Add(trip)),
		Class:     f.Class,
		Reason:    truncate(f.Error),
		Trip:      next.Trips,
		DurationS: int64(trip / time.Second),
		By:        s.opts.ID,
	}, trip)
}

// RecordSuccess resets the failure count after failures; with nothing to
// reset it writes nothing, so healthy traffic costs no KV writes.
func (s *Store) RecordSuccess(ctx context.Context, provider string) error {
	if h, ok := s.Health(provider); !ok || h.ConsecutiveFailures == 0 {
		return nil
	}
	return s.updateHealth(ctx, provider, func(h Health) (Health, bool) {
		if h.ConsecutiveFailures == 0 {
			return h, false
		}
		h.ConsecutiveFailures = 0
		h.LastSuccess = utc(s.opts.Now())
		return h, true
	})
}

// updateHealth applies change to the provider's health with compare-and-set,
// rereading the value from the server after a conflict.
func (s *Store) updateHealth(ctx context.Context, provider string, change func(Health) (Health, bool)) error {
	key := HealthKey(provider)
	release, err := s.writeSlot(ctx, provider)
	if err != nil {
		return err
	}
	defer release()
	s.mu.RLock()
	cur := s.health[provider]
	s.mu.RUnlock()
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
		if err == nil {
			s.remember(provider, next, rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("kvstate: writing %s: %w", key, err)
		}
		if err := casPause(ctx, attempt); err != nil {
			return fmt.Errorf("kvstate: writing %s: %w", key, err)
		}
		if cur, err = s.fetchHealth(ctx, provider); err != nil {
			return err
		}
	}
	return fmt.Errorf("kvstate: writing %s: %d compare-and-set conflicts in a row", key, maxCASRetries)
}

// writeSlot serialises this store's health writes for one provider. Without
// it, an outage that fails all of a processor's in-flight calls at once sets
// its workers racing for the same revision, and those that keep losing run
// out of retries and drop their failure from the count.
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

// casPause waits before compare-and-set retry n (from 0), a random time up
// to 1ms·2^n (at most 100ms), so that a processor that lost does not retry
// in lockstep with the winner's next write (which needs no re-read).
func casPause(ctx context.Context, n int) error {
	limit := min(time.Millisecond<<min(n, 7), 100*time.Millisecond)
	t := time.NewTimer(rand.N(limit))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *Store) fetchHealth(ctx context.Context, provider string) (versioned[Health], error) {
	e, err := s.kv.Get(ctx, HealthKey(provider))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return versioned[Health]{}, nil
	case err != nil:
		return versioned[Health]{}, fmt.Errorf("kvstate: reading %s: %w", HealthKey(provider), err)
	}
	var h Health
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		// An unreadable value is overwritten rather than blocking every write.
		s.opts.Logger.Warn("overwriting unreadable health value", "key", e.Key(), "err", err)
	}
	return versioned[Health]{value: h, rev: e.Revision()}, nil
}

func (s *Store) remember(provider string, h Health, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health.set(provider, h, rev)
}

// openCooldown writes the cooldown key with its TTL. A trip is never lost:
// when a key is still there (another worker's cooldown, or a stale one whose
// until has passed but which the server has not removed yet, up to about a
// second late), a cooldown that ends no sooner than c is left alone, so a
// running cooldown is never shortened; any other is replaced at its revision
// with a fresh TTL. A conflict means someone else wrote first: read again.
func (s *Store) openCooldown(ctx context.Context, provider string, c Cooldown, ttl time.Duration) error {
	key := CooldownKey(provider)
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("kvstate: encoding %s: %w", key, err)
	}
	for attempt := range maxCASRetries {
		rev, err := s.kv.Create(ctx, key, data, jetstream.KeyTTL(ttl))
		if err == nil {
			s.opened(provider, c, rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("kvstate: opening %s: %w", key, err)
		}
		cur, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // expired meanwhile: create it afresh
		}
		if err != nil {
			return fmt.Errorf("kvstate: reading %s: %w", key, err)
		}
		var running Cooldown
		if json.Unmarshal(cur.Value(), &running) == nil && !running.Until.Before(c.Until) {
			s.mu.Lock()
			s.cooldowns.set(provider, running, cur.Revision())
			s.mu.Unlock()
			return nil
		}
		rev, err = s.replace(ctx, key, data, cur.Revision(), ttl)
		if err == nil {
			s.opened(provider, c, rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("kvstate: replacing %s: %w", key, err)
		}
		if err := casPause(ctx, attempt); err != nil {
			return fmt.Errorf("kvstate: opening %s: %w", key, err)
		}
	}
	return fmt.Errorf("kvstate: opening %s: %d compare-and-set conflicts in a row", key, maxCASRetries)
}

// replace writes value to key at revision rev with a fresh TTL, in one
// atomic step: KeyValue.Update would make the key permanent, so this
// publishes to the key's subject with an expected last sequence and a
// per-message TTL (ADR-43), as KeyValue.Create does for a new key. A
// conflict is reported as jetstream.ErrKeyRevisionMismatch.
func (s *Store) replace(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	msg := &nats.Msg{Subject: "$KV." + Bucket + "." + key, Data: value, Header: nats.Header{}}
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, fmt.Errorf("%w: %w", jetstream.ErrKeyRevisionMismatch, err)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// opened applies a cooldown this store wrote to its mirror at once and
// announces it.
func (s *Store) opened(provider string, c Cooldown, rev uint64) {
	s.mu.Lock()
	s.cooldowns.set(provider, c, rev)
	s.mu.Unlock()
	if s.opts.OnCooldown != nil {
		s.opts.OnCooldown(provider, c)
	}
	s.opts.Logger.Warn("provider cooling down", "provider", provider, "until", c.Until, "class", c.Class, "trip", c.Trip, "by", c.By)
}
