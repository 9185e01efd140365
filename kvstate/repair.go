package kvstate

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/topology"
)

const (
	// recreateEvery is the least time between two re-creations by one
	// store; writers that find the bucket gone sooner share the last.
	recreateEvery   = 500 * time.Millisecond
	recreateTimeout = 10 * time.Second
)

// create is kv.Create that, finding the bucket gone, recreates it and
// tries once more: a write must not be lost to a deleted bucket.
func (s *Store) create(ctx context.Context, key string, data []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := s.kv.Create(ctx, key, data, opts...)
	if !topology.Gone(err) {
		return rev, err
	}
	if err := s.recreateBucket(ctx); err != nil {
		return 0, err
	}
	return s.kv.Create(ctx, key, data, opts...)
}

// recreateBucket creates the bucket again after a write or the watch found
// it gone, once for every caller at once, and has the watch reload the
// mirror from it. A store without js waits for a processor to do it.
func (s *Store) recreateBucket(ctx context.Context) error {
	if s.js == nil {
		return fmt.Errorf("kvstate: %s: bucket %w", Bucket, topology.ErrGone)
	}
	s.checkSoon()
	return s.recreate.Do(ctx, func(ctx context.Context) error {
		if _, err := incarnation(ctx, s.kv); !topology.Gone(err) {
			return err // back already, or the server cannot say
		}
		s.opts.Logger.Warn("provider state bucket missing; recreating it", "bucket", Bucket)
		if _, err := topology.RecreateBucket(ctx, s.js, Bucket, s.opts.Replicas); err != nil {
			s.opts.Logger.Warn("recreating the provider state bucket failed; will try again", "bucket", Bucket, "err", err)
			return err
		}
		s.opts.Logger.Info("provider state bucket recreated", "bucket", Bucket)
		return nil
	})
}

// refreshHealth puts the server's health of provider, just read, in the
// mirror, whatever revision the mirror holds: a mirror revision above the
// server's is one of a bucket since deleted or a newer value the watcher
// applied meanwhile. Left in place, the first would leave the provider
// half-open for good after a probe's success found nothing to reset. It
// reports whether that was so.
func (s *Store) refreshHealth(provider string, cur versioned[Health]) (stale bool) {
	s.mu.Lock()
	held, ok := s.m.health[provider]
	stale = ok && held.rev > cur.rev
	if cur.rev == 0 {
		delete(s.m.health, provider)
	} else {
		s.m.health[provider] = cur
	}
	if s.loading != nil && cur.rev != 0 {
		s.loading.health.set(provider, cur.value, cur.rev)
	}
	s.mu.Unlock()
	if stale {
		s.checkSoon()
	}
	return stale
}

// checkSoon asks the watch to check the bucket now.
func (s *Store) checkSoon() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}
