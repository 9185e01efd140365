package kvstate

import (
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// versioned is a mirrored value with the bucket revision it came from, so
// that an older entry never overwrites a newer one: a processor's own writes
// usually reach its mirror before the watcher echoes them.
type versioned[T any] struct {
	value T
	rev   uint64
}

// mirrorMap holds the newest known value of one kind of key, by provider.
type mirrorMap[T any] map[string]versioned[T]

// set stores value at rev unless a newer revision is already held; it
// reports false only in that case.
func (m mirrorMap[T]) set(provider string, value T, rev uint64) bool {
	if cur, ok := m[provider]; ok && cur.rev >= rev {
		return cur.rev == rev
	}
	m[provider] = versioned[T]{value: value, rev: rev}
	return true
}

// apply folds a watcher entry in: a put stores its value, a delete or purge
// (including a TTL expiry marker) removes the key.
func (m mirrorMap[T]) apply(provider string, e jetstream.KeyValueEntry) error {
	if cur, ok := m[provider]; ok && cur.rev >= e.Revision() {
		return nil
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(m, provider)
		return nil
	}
	var value T
	if err := json.Unmarshal(e.Value(), &value); err != nil {
		return err
	}
	m[provider] = versioned[T]{value: value, rev: e.Revision()}
	return nil
}

// mirror is a local copy of the bucket, one map per kind of key. Revisions
// are only comparable within one bucket: a mirror is filled from one bucket
// and replaced whole, never merged, when the bucket is created anew.
type mirror struct {
	health    mirrorMap[Health]
	cooldowns mirrorMap[Cooldown]
	probes    mirrorMap[Probe]
}

func newMirror() *mirror {
	return &mirror{health: mirrorMap[Health]{}, cooldowns: mirrorMap[Cooldown]{}, probes: mirrorMap[Probe]{}}
}

// apply folds one bucket entry into the mirror, ignoring keys of no kind it
// knows and entries older than what it holds.
func (m *mirror) apply(e jetstream.KeyValueEntry) error {
	provider, kind, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return nil
	}
	switch kind {
	case SuffixHealth:
		return m.health.apply(provider, e)
	case SuffixCooldown:
		return m.cooldowns.apply(provider, e)
	case SuffixProbe:
		return m.probes.apply(provider, e)
	}
	return nil
}
