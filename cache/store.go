package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/topology"
)

// Bucket is the KV bucket of the response cache.
const Bucket = topology.CacheBucket

// Key is the bucket key of a request of chain, in scope, with the
// fingerprint of its canonical form: <chain>.<scope>.<fingerprint>.
func Key(chainName, scope, fingerprint string) string {
	return chainName + "." + scope + "." + fingerprint
}

// Store reads and writes entries: each Get one direct read of the key's
// last message, each Put one publish, compare-and-set on the revision Get
// saw. Its methods are safe for concurrent use.
type Store struct {
	js       jetstream.JetStream
	stream   atomic.Pointer[jetstream.Stream] // set by Ensure, read by Get
	replicas int
}

// Open creates or updates the bucket idempotently and returns a Store on
// it. replicas is the bucket's replica count; zero means 1.
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	s := &Store{js: js, replicas: max(replicas, 1)}
	if err := s.open(ctx, topology.OpenBucket); err != nil {
		return nil, err
	}
	return s, nil
}

// Ensure creates the bucket again (topology.RecreateBucket), for a read or
// a write that found it gone. Errors are the server's, wrapped.
func (s *Store) Ensure(ctx context.Context) error { return s.open(ctx, topology.RecreateBucket) }

func (s *Store) open(ctx context.Context, create func(context.Context, jetstream.JetStream, string, int) (jetstream.KeyValue, error)) error {
	if _, err := create(ctx, s.js, Bucket, s.replicas); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	stream, err := s.js.Stream(ctx, kvStream)
	if err != nil {
		return fmt.Errorf("cache: opening bucket %s: %w", Bucket, err)
	}
	s.stream.Store(&stream)
	return nil
}

// kvStream is the stream that holds the bucket.
const kvStream = "KV_" + Bucket

func subject(key string) string { return "$KV." + Bucket + "." + key }

// Get returns the entry under key and the revision to write over it with
// (the sequence of the key's last message, a marker's included; 0 when it
// never held one). found is false for no entry, a deleted or expired one,
// one of another version, and an invalid one, for which err wraps
// ErrInvalidEntry and rev still stands. Other errors are the server's
// (Gone: the bucket is deleted).
func (s *Store) Get(ctx context.Context, key string) (e Entry, rev uint64, found bool, err error) {
	m, err := (*s.stream.Load()).GetLastMsgForSubject(ctx, subject(key))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return Entry{}, 0, false, nil
	case err != nil:
		return Entry{}, 0, false, fmt.Errorf("cache: reading %s: %w", key, err)
	}
	if isMarker(m.Header) {
		return Entry{}, m.Sequence, false, nil
	}
	e, err = DecodeEntry(m.Data)
	switch {
	case errors.Is(err, errOtherVersion):
		return Entry{}, m.Sequence, false, nil
	case err != nil:
		return Entry{}, m.Sequence, false, fmt.Errorf("cache: reading %s: %w", key, err)
	}
	return e, m.Sequence, true, nil
}

// isMarker reports whether a message is a delete, a purge or the server's
// marker of an expired key.
func isMarker(h nats.Header) bool {
	switch h.Get("KV-Operation") {
	case "DEL", "PURGE":
		return true
	}
	return h.Get(jetstream.MarkerReasonHeader) != ""
}

// ErrConflict is returned by Put when another writer stored an answer
// since Get read the key; theirs stands.
var ErrConflict = errors.New("cache: the entry changed since it was read")

// Put stores e under key if the key's last revision is still rev (0: the
// key holds nothing), with a TTL that ends at e.StaleUntil. A lost race
// is ErrConflict (wrapping jetstream.ErrKeyRevisionMismatch).
func (s *Store) Put(ctx context.Context, key string, e Entry, rev uint64) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("cache: encoding %s: %w", key, err)
	}
	_, err = topology.Replace(ctx, s.js, subject(key), data, rev, keyTTL(e))
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w (%w)", ErrConflict, err)
	case err != nil:
		return fmt.Errorf("cache: storing %s: %w", key, err)
	}
	return nil
}
