package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// A provider name that running processors define differently keeps one
// circuit per definition (docs/state.md, "One circuit per definition"): the
// definition that <provider>.definition records keeps the plain keys, any
// other its own under <provider>=<the first 8 hex digits of its
// fingerprint>. KV keys allow "=" (nats.go's validKeyRe) and provider names
// do not (config.ValidName), so no provider name is another's circuit.
const (
	// SuffixDefinition names the key of a name's holder:
	// <provider>.definition.
	SuffixDefinition = "definition"
	circuitMark      = "="
	shortFingerprint = 8  // hex digits of a fingerprint in a circuit name
	fingerprintLen   = 16 // hex digits of fleet.Definition.Fingerprint
)

// DefinitionKey returns the bucket key that records which definition
// holds provider's plain keys.
func DefinitionKey(provider string) string { return provider + "." + SuffixDefinition }

// Holder is the value of <provider>.definition: the definition whose
// circuit keeps the provider's plain keys.
type Holder struct {
	// Fingerprint is the definition's fingerprint: 16 hex digits
	// (fleet.Definition.Fingerprint); read as "" when it is none, a
	// definition no processor runs.
	Fingerprint string `json:"fingerprint"`
	// Definition is the definition on one line, for whoever reads the key.
	Definition string `json:"definition,omitempty"`
	// By is the processor that wrote the key.
	By string `json:"by"`
}

// check reads a fingerprint that is not 16 lowercase hex digits as none:
// the name is then held for a definition no processor runs.
func (h *Holder) check() error {
	if !isFingerprint(h.Fingerprint, fingerprintLen) {
		h.Fingerprint = ""
	}
	return nil
}

// Circuit returns the circuit a definition of provider with fingerprint
// keeps, where holder is the holder of the name and held says whether one
// is recorded: provider itself when none is, or for the holder's
// definition; else DefinitionCircuit.
func Circuit(provider, fingerprint string, holder Holder, held bool) string {
	if !held || (holder.Fingerprint != "" && holder.Fingerprint == fingerprint) {
		return provider
	}
	return DefinitionCircuit(provider, fingerprint)
}

// DefinitionCircuit returns the circuit name of the definition of provider
// with fingerprint when another holds the name: provider=<the first 8 hex
// digits of fingerprint>; provider itself for a shorter fingerprint.
func DefinitionCircuit(provider, fingerprint string) string {
	if len(fingerprint) < shortFingerprint {
		return provider
	}
	return provider + circuitMark + fingerprint[:shortFingerprint]
}

// SplitCircuit returns the provider name of a circuit and the short
// fingerprint of its definition ("" for a plain circuit); ok is false for a
// name that is neither a plain name nor provider=<8 hex digits>.
func SplitCircuit(circuit string) (provider, short string, ok bool) {
	provider, short, found := strings.Cut(circuit, circuitMark)
	if !found {
		return circuit, "", true
	}
	return provider, short, provider != "" && isFingerprint(short, shortFingerprint)
}

// CircuitProvider returns the provider name of a circuit.
func CircuitProvider(circuit string) string {
	provider, _, _ := strings.Cut(circuit, circuitMark)
	return provider
}

// isFingerprint reports whether s is n lowercase hex digits.
func isFingerprint(s string, n int) bool {
	return len(s) == n && strings.Trim(s, "0123456789abcdef") == ""
}

// Holder returns the mirrored holder of provider's plain keys.
func (s *Store) Holder(provider string) (Holder, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.m.definitions[provider]
	return h.value, ok
}

// CircuitOf returns the circuit that the definition of provider with
// fingerprint keeps now, as the mirror knows the holder (see Circuit).
func (s *Store) CircuitOf(provider, fingerprint string) string {
	h, held := s.Holder(provider)
	return Circuit(provider, fingerprint, h, held)
}

// Circuits returns provider's circuits of which the mirror holds a key,
// the plain one and other definitions', sorted.
func (s *Store) Circuits(provider string) []string {
	s.mu.RLock()
	all := slices.Concat(slices.Collect(maps.Keys(s.m.health)), slices.Collect(maps.Keys(s.m.cooldowns)), slices.Collect(maps.Keys(s.m.probes)))
	s.mu.RUnlock()
	out := slices.DeleteFunc(all, func(c string) bool { return CircuitProvider(c) != provider })
	slices.Sort(out)
	return slices.Compact(out)
}

// Claim records h as the holder of provider's plain keys if none is
// recorded (KV Create: the first writer wins), and puts the holder it finds
// in the mirror, whoever won. Another holder stands, unless it is
// unreadable: then h replaces it at its revision. A bucket found gone is
// recreated, once.
func (s *Store) Claim(ctx context.Context, provider string, h Holder) error {
	key := DefinitionKey(provider)
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("kvstate: encoding %s: %w", key, err)
	}
	rev, err := s.create(ctx, key, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, err := s.kv.Get(ctx, key)
		if err != nil {
			return nil // gone or unreadable now: the next claim tries again
		}
		if held, err := decode[Holder](e.Value()); err == nil {
			h, rev = held, e.Revision()
		} else if rev, err = s.kv.Update(ctx, key, data, e.Revision()); err != nil {
			return nil // a conflict: someone else wrote it meanwhile
		}
	} else if err != nil {
		return fmt.Errorf("kvstate: creating %s: %w", key, err)
	}
	s.keep(func(m *mirror) bool { return m.definitions.set(provider, h, rev) })
	return nil
}

// TakeOver makes h the holder of provider's plain keys in place of the
// holder the mirror knows, whose definition runs nowhere any more: it
// deletes the plain circuit's keys, then replaces the holder with
// compare-and-set, so that h's processors, moving to the plain keys with the
// new holder, have seen the deletions. The holder is read from the server
// first, lest a mirror behind another's take-over delete the winner's keys.
// It reports false when none is known or the holder changed.
func (s *Store) TakeOver(ctx context.Context, provider string, h Holder) (bool, error) {
	s.mu.RLock()
	cur, ok := s.m.definitions[provider]
	s.mu.RUnlock()
	if !ok {
		return false, nil
	}
	key := DefinitionKey(provider)
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kvstate: reading %s: %w", key, err)
	}
	if e.Revision() != cur.rev {
		s.apply(e) // the mirror learns the new holder now
		return false, nil
	}
	if err := s.Clear(ctx, provider); err != nil {
		return false, err
	}
	data, err := json.Marshal(h)
	if err != nil {
		return false, fmt.Errorf("kvstate: encoding %s: %w", key, err)
	}
	rev, err := s.kv.Update(ctx, key, data, cur.rev)
	if casConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kvstate: writing %s: %w", key, err)
	}
	s.keep(func(m *mirror) bool { return m.definitions.set(provider, h, rev) })
	return true, nil
}

// Clear deletes circuit's health, cooldown and probe keys, each at the
// revision read (a key written meanwhile is read again), for a circuit no
// processor runs any more.
func (s *Store) Clear(ctx context.Context, circuit string) error {
	for _, kind := range []string{SuffixHealth, SuffixCooldown, SuffixProbe} {
		if err := s.deleteKey(ctx, circuit, kind, true, nil); err != nil {
			return err
		}
	}
	return nil
}
