package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/topology"
)

// SuffixProbe names the half-open lease key: <provider>.probe.
const SuffixProbe = "probe"

// clockSkew is how far a processor's clock may run ahead of another's: a
// probe lease is lapsed only this long past its until.
const clockSkew = time.Minute

// ProbeKey returns the bucket key of a provider's probe lease.
func ProbeKey(provider string) string { return provider + "." + SuffixProbe }

// Probe is the value of <provider>.probe: who holds the half-open lease and
// until when (the key's TTL ends it if the holder dies).
type Probe struct {
	Until time.Time `json:"until"`
	By    string    `json:"by"`
}

// CircuitState is a provider's circuit as every processor sees it.
type CircuitState int

// The circuit states.
const (
	StateClosed   CircuitState = iota // calls go through
	StateOpen                         // a cooldown runs: no call goes to the provider
	StateHalfOpen                     // the cooldown ended, no success since: one probe at a time
)

var stateNames = []string{StateClosed: "closed", StateOpen: "open", StateHalfOpen: "half-open"}

// String returns closed, open or half-open.
func (s CircuitState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "closed"
	}
	return stateNames[s]
}

// State returns the circuit state of provider at now, from the mirror.
func (s *Store) State(provider string, now time.Time) CircuitState { return s.row(provider, now).State }

// halfOpen reports whether the provider tripped and has not succeeded since.
func halfOpen(h Health) bool {
	return !h.LastTrip.IsZero() && h.LastSuccess.Before(h.LastTrip)
}

// Admit decides whether a call may go to provider now: closed, yes; open,
// no; half-open, only for the worker that creates its probe lease (with a
// TTL of lease, lest a crashed prober hold it for ever).
func (s *Store) Admit(ctx context.Context, provider string, now time.Time, lease time.Duration) chain.Admission {
	if until, cooling := s.Cooling(provider, now); cooling {
		return chain.Admission{Until: until}
	}
	if h, ok := s.Health(provider); !ok || !halfOpen(h) {
		return chain.Admission{Allowed: true}
	}
	if held, ok := s.probe(provider); ok && held.Until.After(now) {
		return chain.Admission{Until: held.Until} // another worker's lease
	}
	lease = wholeSeconds(lease)
	p := Probe{Until: utc(now.Add(lease)), By: s.opts.ID}
	data, err := json.Marshal(p)
	if err != nil {
		return chain.Admission{Until: p.Until}
	}
	// A lease there is replaced once it lapsed clockSkew ago (its until is
	// by its holder's clock): one written without a TTL is never removed.
	rev, kept, err := s.put(ctx, ProbeKey(provider), data, lease, func(e jetstream.KeyValueEntry) bool {
		held, err := decode[Probe](e.Value())
		return err == nil && held.Until.Add(clockSkew).After(now)
	})
	if err != nil || kept != 0 {
		if err != nil {
			s.opts.Logger.Warn("taking the probe lease", "provider", provider, "err", err)
		}
		until := p.Until
		if held, ok := s.probe(provider); ok && held.Until.After(now) {
			until = held.Until
		}
		return chain.Admission{Until: until}
	}
	s.keep(func(m *mirror) bool { return m.probes.set(provider, p, rev) })
	if adm, ended := s.probeEnded(ctx, provider, now); ended {
		if err := s.ReleaseProbe(ctx, provider, rev); err != nil {
			s.opts.Logger.Warn("releasing the probe lease", "provider", provider, "err", err)
		}
		return adm
	}
	s.opts.Logger.Info("probing provider after its cooldown", "provider", provider)
	return chain.Admission{Allowed: true, Probe: true, Lease: rev}
}

// probeEnded reads provider's health from the bucket once its lease is
// won: the lease may be free because another's probe just released it,
// having recorded an outcome this mirror has not seen yet, a trip (no
// call then) or a success (a plain call). A health the bucket cannot give
// leaves the mirror's judgement standing.
func (s *Store) probeEnded(ctx context.Context, provider string, now time.Time) (chain.Admission, bool) {
	cur, err := s.fetchHealth(ctx, provider)
	if err != nil || cur.rev == 0 {
		return chain.Admission{}, false
	}
	s.keep(func(m *mirror) bool { return m.health.set(provider, cur.value, cur.rev) })
	if until, cooling := s.Cooling(provider, now); cooling {
		return chain.Admission{Until: until}, true
	}
	if h, _ := s.Health(provider); !halfOpen(h) {
		return chain.Admission{Allowed: true}, true
	}
	return chain.Admission{}, false
}

// ReleaseProbe gives up the probe lease that Admit granted as lease (the
// key's revision; 0 is none) once the probe's outcome is recorded. It
// deletes only that revision: a lease another took after it lapsed stays.
func (s *Store) ReleaseProbe(ctx context.Context, provider string, lease uint64) error {
	if lease == 0 {
		return nil
	}
	err := s.kv.Delete(ctx, ProbeKey(provider), jetstream.LastRevision(lease))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyNotFound) && !topology.Gone(err) {
		return fmt.Errorf("kvstate: releasing %s: %w", ProbeKey(provider), err)
	}
	return nil
}

func (s *Store) probe(provider string) (Probe, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.m.probes[provider]
	return p.value, ok
}
