package kvstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/text"
)

// ResetOutcome is what Reset did to one provider.
type ResetOutcome struct {
	Before ProviderStatus // as the mirror held it
	// Done is false when there was nothing to reset: no cooldown, no probe
	// lease, no failures and no trips recorded. Nothing was written then.
	Done bool
}

// Reset ends provider's cooldown and clears its health for every processor,
// as the operator by (user@host) asks (processor reset). It writes the
// health first, with compare-and-set: a record of the reset alone
// (afterReset), which every mirror reads as the end of any cooldown opened
// before it (resetEnds); then it deletes the cooldown key the reset ended
// and the probe lease. The mirror must be loaded first: what it holds
// decides whether there is anything to reset.
func (s *Store) Reset(ctx context.Context, provider, by string) (ResetOutcome, error) {
	now := s.opts.Now()
	out := ResetOutcome{Before: s.row(provider, now)}
	if !s.resettable(provider) {
		return out, nil
	}
	var reset Health // set by the last try of change
	err := s.updateHealth(ctx, provider, func(h Health) (Health, bool) {
		reset = afterReset(h, by, now)
		return reset, true
	})
	if err != nil {
		return out, err
	}
	out.Done = true
	err = s.deleteKey(ctx, provider, SuffixCooldown, true, func(value []byte) bool {
		c, err := decode[Cooldown](value)
		return err == nil && !resetEnds(c, reset) // opened after the reset: not its to end
	})
	if err != nil {
		return out, err
	}
	// A lease taken meanwhile is not the reset's. The prober's outcome
	// changes nothing: no failures to reset, or a call begun before.
	return out, s.deleteKey(ctx, provider, SuffixProbe, false, nil)
}

// resettable reports whether the mirror holds anything of provider that a
// reset would clear.
func (s *Store) resettable(provider string) bool {
	h, c := s.view(provider)
	_, hasProbe := s.probe(provider)
	return hasProbe || c != nil || h.ConsecutiveFailures > 0 || h.Trips > 0 || !h.LastTrip.IsZero()
}

// deleteKey deletes circuit's key of kind at the revision read, unless keep
// says the value read stays. A key written meanwhile is read and judged
// again when retry is set, else left alone.
func (s *Store) deleteKey(ctx context.Context, circuit, kind string, retry bool, keep func([]byte) bool) error {
	key := circuit + "." + kind
	for attempt := range maxCASRetries {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kvstate: reading %s: %w", key, err)
		}
		if keep != nil && keep(e.Value()) {
			return nil
		}
		err = s.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		switch {
		case err == nil:
			s.forget(circuit, kind, e.Revision())
			return nil
		case !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			return fmt.Errorf("kvstate: deleting %s: %w", key, err)
		case !retry:
			return nil
		}
		if err := casPause(ctx, attempt); err != nil {
			return fmt.Errorf("kvstate: deleting %s: %w", key, err)
		}
	}
	return fmt.Errorf("kvstate: deleting %s: %d compare-and-set conflicts in a row", key, maxCASRetries)
}

// forget drops provider's key of kind from the mirrors if they still hold
// revision rev, which this store just deleted.
func (s *Store) forget(provider, kind string, rev uint64) {
	s.keep(func(m *mirror) bool {
		switch kind {
		case SuffixHealth:
			m.health.forget(provider, rev)
		case SuffixCooldown:
			m.cooldowns.forget(provider, rev)
		case SuffixProbe:
			m.probes.forget(provider, rev)
		}
		return true
	})
}

// OperatorTrip is an operator's cooldown of one provider (processor trip).
type OperatorTrip struct {
	// For is the cooldown's length: whole seconds, at least one, as KV
	// TTLs are.
	For time.Duration
	// Reason says why, in the operator's words; cut to 300 bytes.
	Reason string
	// By names the operator: user@host.
	By string
	// HalfOpen records the trip in the provider's health as well, so that
	// the provider is half-open when the cooldown ends; off for a provider
	// whose failure_threshold is 0, which has no circuit of its own.
	HalfOpen bool
}

// TripOutcome is what Trip did.
type TripOutcome struct {
	// Opened is false when a cooldown running until Until or later was
	// there already and is left as it is: a trip never shortens one.
	Opened bool
	Until  time.Time // when the provider's cooldown now ends
	// Cooldown is the cooldown key now running, the operator's or the one
	// kept; nil when only the trip the health records keeps it out.
	Cooldown *Cooldown
}

// Trip opens an operator's cooldown of provider for every processor. The
// key is written first, so that no processor probes the provider between
// the two writes, then, when t.HalfOpen, the trip is recorded in the health
// (afterOperatorTrip). A running cooldown that ends no sooner is left as it
// is; one that ends sooner is extended. The mirror must be loaded first.
func (s *Store) Trip(ctx context.Context, provider string, t OperatorTrip) (TripOutcome, error) {
	if t.For < time.Second || t.For%time.Second != 0 {
		return TripOutcome{}, fmt.Errorf("kvstate: tripping %s: %s is not whole seconds of at least 1s", provider, t.For)
	}
	now := utc(s.opts.Now())
	c := Cooldown{Until: now.Add(t.For), Reason: truncate(t.Reason), DurationS: int64(t.For / time.Second),
		By: text.Cut(t.By, maxBy), Operator: true}
	if until, cooling := s.Cooling(provider, now); cooling && !until.Before(c.Until) {
		_, running := s.view(provider)
		return TripOutcome{Until: until, Cooldown: running}, nil
	}
	running, err := s.openCooldown(ctx, provider, c, t.For)
	if err != nil {
		return TripOutcome{}, err
	}
	if running != nil {
		return TripOutcome{Until: running.Until, Cooldown: running}, nil
	}
	out := TripOutcome{Opened: true, Until: c.Until, Cooldown: &c}
	if !t.HalfOpen {
		return out, nil
	}
	return out, s.updateHealth(ctx, provider, func(h Health) (Health, bool) { return afterOperatorTrip(h, now, t.For) })
}

// operatorActs notes what the mirror holds of provider; the function it
// returns logs, once, an operator's reset or trip of provider that has
// reached the mirror since.
func (s *Store) operatorActs(provider string) (log func()) {
	health, cooldownRev := s.operatorView(provider)
	return func() {
		h, rev := s.operatorView(provider)
		if h.rev != health.rev && !h.value.ResetAt.IsZero() && !h.value.ResetAt.Equal(health.value.ResetAt) {
			s.opts.Logger.Info("provider reset by an operator: cooldown ended, failures and trips cleared",
				"provider", provider, "by", h.value.ResetBy, "at", h.value.ResetAt)
		}
		if rev != cooldownRev {
			if _, c := s.view(provider); c != nil && c.Operator {
				s.opts.Logger.Info("provider tripped by an operator", "provider", provider, "until", c.Until, "reason", c.Reason, "by", c.By)
			}
		}
	}
}

// operatorView is provider's mirrored health and the revision of its
// cooldown key.
func (s *Store) operatorView(provider string) (versioned[Health], uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m.health[provider], s.m.cooldowns[provider].rev
}
