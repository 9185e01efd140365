package kvstate

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/internal/wait"
)

const (
	// checkEvery is how often a watch confirms that its bucket is still
	// there and the same: a watcher of a bucket deleted and created again
	// waits, silent, for revisions of the old one.
	checkEvery   = time.Second
	checkTimeout = 2 * time.Second
	loadTimeout  = 10 * time.Second // reading the bucket's current values
	// retryBase and retryMax bound the pause before watching again.
	retryBase = 100 * time.Millisecond
	retryMax  = 5 * time.Second
)

// Following reports whether the mirror follows the bucket: its values are
// loaded, a watcher delivers changes, and the last check found the bucket
// still there. It is false before Load, while the store watches again, and
// while the bucket cannot be reached.
func (s *Store) Following() bool { return s.following.Load() }

// Load reads the bucket's current values into the mirror, from scratch,
// recreating the bucket if gone and the store has js. Run follows from the
// watch it opens.
func (s *Store) Load(ctx context.Context) error {
	w, err := s.load(ctx)
	if err != nil {
		return err
	}
	if old := s.loaded.Swap(w); old != nil {
		old.stop()
	}
	return nil
}

// Run keeps the mirror following the bucket until ctx ends, then returns
// nil. When a watch ends (its watcher closed, the bucket deleted or created
// anew, the connection re-established) the mirror is not following until
// Run has reloaded it from scratch (recreating the bucket when it can) and
// watches again, with a growing, jittered pause between tries. Call it
// after Load or instead of it, one at a time.
func (s *Store) Run(ctx context.Context) error {
	w := s.loaded.Swap(nil)
	lost := "" // why the last watch ended, while none follows
	tries := 0 // failed loads in a row
	for {
		if w == nil {
			var err error
			if w, err = s.load(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.opts.Logger.Log(ctx, lo.Ternary(tries == 0, slog.LevelWarn, slog.LevelDebug),
					"watching the provider state bucket failed; will try again", "bucket", Bucket, "err", err)
				tries++
				if wait.Sleep(ctx, retryPause(tries)) != nil {
					return nil
				}
				continue
			}
			if lost != "" {
				s.opts.Logger.Info("provider state followed again", "bucket", Bucket, "after", lost)
				lost = ""
			}
			tries = 0
		}
		lost = w.follow(ctx, s.recheck, s.apply, s.following.Store)
		w.stop()
		w = nil
		s.following.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		s.opts.Logger.Warn("provider state watch ended; not ready until it follows again", "bucket", Bucket, "why", lost)
		// A watch that ended with a server restart would fail again at once.
		if wait.Sleep(ctx, retryPause(0)) != nil {
			return nil
		}
	}
}

// load opens a watch of the bucket and reads its current values into a
// fresh mirror that replaces the old one once complete.
func (s *Store) load(ctx context.Context) (*bucketWatch, error) {
	w, err := openWatch(ctx, s.kv, s.conn)
	if topology.Gone(err) && s.js != nil {
		if err = s.recreateBucket(ctx); err == nil {
			w, err = openWatch(ctx, s.kv, s.conn)
		}
	}
	if err != nil {
		return nil, err
	}
	fresh := newMirror()
	s.mu.Lock()
	s.loading = fresh
	s.mu.Unlock()
	fail := func(err error) (*bucketWatch, error) {
		s.mu.Lock()
		s.loading = nil
		s.mu.Unlock()
		w.stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, loadTimeout, fmt.Errorf("initial values not read within %s", loadTimeout))
	defer cancel()
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return fail(fmt.Errorf("kvstate: watcher of %s closed before the initial values", Bucket))
			case e == nil: // end of the initial values
				s.mu.Lock()
				s.m, s.loading = fresh, nil
				s.mu.Unlock()
				s.following.Store(true)
				return w, nil
			}
			s.applyTo(func() *mirror { return fresh }, e)
		case <-ctx.Done():
			return fail(fmt.Errorf("kvstate: reading %s: %w", Bucket, context.Cause(ctx)))
		}
	}
}

// retryPause is the pause before try n (from 0) to watch again: doubling up
// to retryMax, the upper half at random so that processors come out of step.
func retryPause(n int) time.Duration {
	d := min(retryBase<<min(n, 10), retryMax)
	return d/2 + rand.N(d/2)
}

// bucketWatch is one watch of every key of the bucket, with what tells that
// it ended without a word.
type bucketWatch struct {
	jetstream.KeyWatcher
	cancel     context.CancelFunc
	kv         jetstream.KeyValue
	conn       *nats.Conn // nil: reconnects are not checked
	created    time.Time  // see incarnation
	reconnects uint64
}

// openWatch watches every key of kv. A bucket that does not exist is
// reported as topology.Gone.
func openWatch(ctx context.Context, kv jetstream.KeyValue, conn *nats.Conn) (*bucketWatch, error) {
	// Read before the watch starts, lest it name a bucket created after.
	created, err := incarnation(ctx, kv)
	if err != nil {
		return nil, err
	}
	var reconnects uint64
	if conn != nil {
		reconnects = conn.Stats().Reconnects
	}
	// The watch lives until stop: Load's ctx is the caller's start-up I/O,
	// and nats.go would end the watch with it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kvstate: watching %s: %w", Bucket, err)
	}
	return &bucketWatch{KeyWatcher: w, cancel: cancel, kv: kv, conn: conn, created: created, reconnects: reconnects}, nil
}

// incarnation returns when the bucket's stream was created, which tells a
// bucket created again, whose revisions start over, from the one before. A
// bucket that does not exist is topology.Gone.
func incarnation(ctx context.Context, kv jetstream.KeyValue) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	st, err := kv.Status(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("kvstate: checking %s: %w", Bucket, err)
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		return bs.StreamInfo().Created, nil
	}
	return time.Time{}, nil // no stream to tell by: every check matches
}

// follow hands the watch's entries (nil ends the initial values) to apply
// until ctx ends, returning "", or until the watch ends, returning why: its
// watcher closed, or a check (every checkEvery, and on recheck) found the
// bucket gone or created anew or the connection re-established (a restarted
// server loses the watcher's consumer). confirmed, if set, hears after each
// other check whether it reached the bucket.
func (w *bucketWatch) follow(ctx context.Context, recheck <-chan struct{}, apply func(jetstream.KeyValueEntry), confirmed func(bool)) string {
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ""
		case e, ok := <-w.Updates():
			if !ok {
				return "watcher closed"
			}
			apply(e)
			continue
		case <-tick.C:
		case <-recheck:
		}
		ended, err := w.check(ctx)
		if ended != "" {
			return ended
		}
		if confirmed != nil && ctx.Err() == nil {
			confirmed(err == nil)
		}
	}
}

// check returns why the watch has ended, or "" and whether the bucket could
// be reached to tell.
func (w *bucketWatch) check(ctx context.Context) (ended string, err error) {
	if w.conn != nil && w.conn.Stats().Reconnects != w.reconnects {
		return "reconnected to NATS", nil
	}
	created, err := incarnation(ctx, w.kv)
	switch {
	case topology.Gone(err):
		return "bucket deleted", nil
	case err != nil:
		return "", err
	case !created.Equal(w.created):
		return "bucket created anew", nil
	}
	return "", nil
}

// stop ends the watch, draining the channel until the client closes it: its
// delivery goroutine may be blocked on an entry nobody reads.
func (w *bucketWatch) stop() {
	_ = w.Stop()
	w.cancel()
	go func() { // ends when the client closes the channel
		for range w.Updates() {
		}
	}()
}
