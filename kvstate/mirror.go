package kvstate

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// versioned is a mirrored value with its bucket revision, so that an older
// entry never overwrites a newer one: a processor's own writes usually reach
// its mirror before the watcher echoes them.
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

// forget drops provider's value if it is still at revision rev.
func (m mirrorMap[T]) forget(provider string, rev uint64) {
	if m[provider].rev == rev {
		delete(m, provider)
	}
}

// applyEntry folds a watcher entry into m: a put stores its value, a delete
// or purge (a TTL's marker too) removes the key. A value that does not
// decode or breaks its rules (check) is not taken, and the error says why.
func applyEntry[T any, P checked[T]](m mirrorMap[T], provider string, e jetstream.KeyValueEntry) error {
	if cur, ok := m[provider]; ok && cur.rev >= e.Revision() {
		return nil
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(m, provider)
		return nil
	}
	value, err := decode[T, P](e.Value())
	if err != nil {
		return err
	}
	m[provider] = versioned[T]{value: value, rev: e.Revision()}
	return nil
}

// mirror is a local copy of the bucket, one map per kind of key. Revisions
// compare within one bucket only: a mirror is replaced whole, never merged,
// when the bucket is created anew.
type mirror struct {
	health      mirrorMap[Health]
	cooldowns   mirrorMap[Cooldown]
	probes      mirrorMap[Probe]
	definitions mirrorMap[Holder]  // by provider name; the maps above by circuit
	running     mirrorMap[Running] // by the key's first token
}

func newMirror() *mirror {
	return &mirror{health: mirrorMap[Health]{}, cooldowns: mirrorMap[Cooldown]{}, probes: mirrorMap[Probe]{}, definitions: mirrorMap[Holder]{}, running: mirrorMap[Running]{}}
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
		return applyEntry(m.health, provider, e)
	case SuffixCooldown:
		return applyEntry(m.cooldowns, provider, e)
	case SuffixProbe:
		return applyEntry(m.probes, provider, e)
	case SuffixDefinition:
		return applyEntry(m.definitions, provider, e)
	case SuffixRunning:
		return applyEntry(m.running, provider, e)
	}
	return nil
}
