package kvstate

import (
	"encoding/json"

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

// set stores value at rev unless a newer revision is already held.
func (m mirrorMap[T]) set(provider string, value T, rev uint64) {
	if cur, ok := m[provider]; !ok || cur.rev < rev {
		m[provider] = versioned[T]{value: value, rev: rev}
	}
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
