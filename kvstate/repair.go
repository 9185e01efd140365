package kvstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/internal/wait"
)

const (
	// recreateEvery is the least time between two re-creations of the
	// bucket by one store; writers that find it gone sooner share the last.
	recreateEvery = 500 * time.Millisecond
	// recreatePause is how long a bucket found gone is left before it is
	// created again (see recreateBucket).
	recreatePause = time.Second
	// recreateTimeout bounds one re-creation.
	recreateTimeout = 10 * time.Second
)

// errBucketGone marks the bucket found not to exist; topology.Gone reports
// it as such.
var errBucketGone = fmt.Errorf("bucket %w", topology.ErrGone)

// create is kv.Create that, finding the bucket gone, creates the bucket
// again (recreateBucket) and the key on it, once: a single write must not
// be lost to a deleted bucket. An error of the re-creation is returned as
// the create's.
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

// recreateBucket creates the bucket again, with OpenBucket as at start, after
// a write or the watch found it gone: once for every caller that finds it gone
// at once, and only if it is still gone (another processor may have been
// first). It also asks the watch to check the bucket, so that the mirror is
// reloaded from the new one. A store without js cannot: it waits for a
// processor to do it.
func (s *Store) recreateBucket(ctx context.Context) error {
	if s.js == nil {
		return fmt.Errorf("kvstate: %s: %w", Bucket, errBucketGone)
	}
	s.checkSoon()
	return s.recreate.Do(ctx, func(ctx context.Context) error {
		if _, err := incarnation(ctx, s.kv); !errors.Is(err, errBucketGone) {
			return err // back already, or the server cannot say
		}
		s.opts.Logger.Warn("provider state bucket missing; recreating it", "bucket", Bucket)
		// A bucket created again at once, while the server may still be
		// ending the one deleted, can be left without its store: a
		// second's pause avoids it, as for detour's streams (package
		// stream's recreatePause).
		if err := wait.Sleep(ctx, recreatePause); err != nil {
			return err
		}
		if _, err := OpenBucket(ctx, s.js, s.opts.Replicas); err != nil {
			s.opts.Logger.Warn("recreating the provider state bucket failed; will try again", "bucket", Bucket, "err", err)
			return err
		}
		s.opts.Logger.Info("provider state bucket recreated", "bucket", Bucket)
		return nil
	})
}

// refreshHealth puts the server's health of provider, just read, in the
// mirror, whatever revision the mirror holds. Revisions never go down within
// one bucket, so a mirror revision above the server's (or a key the server no
// longer has) is one of a bucket since deleted: left in place, it would
// outlive the write, and a probe's success that finds nothing to reset on
// the server would leave the provider half-open in this mirror for good.
//
// It reports whether the mirror held a higher revision than cur: then either
// the bucket was recreated, or the watcher applied a newer value between the
// read and now, which must not stay replaced by the older one (see
// reconcileHealth).
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

// reconcileHealth reads provider's health once more after refreshHealth
// replaced a higher mirror revision, and keeps it if it is newer than what
// the mirror now holds. Revisions only grow within a bucket, so if the
// replaced value was the watcher's newer one from this same bucket, this
// read returns it (or something newer) again; if it was one of a deleted
// bucket, this read returns the new bucket's value. A value the watcher
// applies meanwhile is newer still and is kept.
func (s *Store) reconcileHealth(ctx context.Context, provider string) {
	again, err := s.fetchHealth(ctx, provider)
	if err != nil || again.rev == 0 {
		return
	}
	s.keep(func(m *mirror) bool { return m.health.set(provider, again.value, again.rev) })
}

// checkSoon asks the watch to check the bucket now rather than at its next
// tick.
func (s *Store) checkSoon() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}
