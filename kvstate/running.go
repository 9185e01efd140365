package kvstate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/samber/lo"
)

// SuffixRunning names the key in which a running processor records what it
// runs: <processor>.running, with a TTL it renews while it runs.
const SuffixRunning = "running"

// RunningKey returns the bucket key of processor's record: its id with
// every byte a key token cannot hold (a hostname's dots among them) as "_".
func RunningKey(processor string) string {
	token := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			return r
		}
		return '_'
	}, processor)
	return token + "." + SuffixRunning
}

// Running is one processor's record as stored: JSON its writer's package
// reads.
type Running struct{ json.RawMessage }

func (r *Running) check() error { return nil }

// Running returns every record of a running processor the mirror holds, in
// key order.
func (s *Store) Running() []json.RawMessage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return lo.Map(slices.Sorted(maps.Keys(s.m.running)), func(token string, _ int) json.RawMessage {
		return s.m.running[token].value.RawMessage
	})
}

// Record writes processor's record, data, with a TTL of ttl (whole
// seconds, at least 1 s), replacing the one before in one atomic step (a Put
// would make the key permanent).
func (s *Store) Record(ctx context.Context, processor string, data []byte, ttl time.Duration) error {
	key := RunningKey(processor)
	rev, _, err := s.put(ctx, key, data, ttl, nil)
	if err != nil {
		return fmt.Errorf("kvstate: recording %s: %w", key, err)
	}
	token, _, _ := strings.Cut(key, ".")
	s.keep(func(m *mirror) bool { return m.running.set(token, Running{data}, rev) })
	return nil
}

// Withdraw deletes processor's record, for a processor that stops.
func (s *Store) Withdraw(ctx context.Context, processor string) error {
	if err := s.kv.Delete(ctx, RunningKey(processor)); err != nil {
		return fmt.Errorf("kvstate: withdrawing %s: %w", RunningKey(processor), err)
	}
	return nil
}
