package kvstate_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// loaded returns a store whose mirror is loaded but not followed (no Run),
// so that what a write does on its own is seen apart from the watch's
// reload.
func (e env) loaded(t *testing.T, id string, now func() time.Time) *kvstate.Store {
	t.Helper()
	s := kvstate.New(e.js, e.kv, kvstate.Options{ID: id, Now: now})
	if err := s.Load(e.ctx); err != nil {
		t.Fatalf("Load %s: %v", id, err)
	}
	return s
}

// sampleFollowing records whether s's mirror stopped following at some
// point, sampling every millisecond until the test ends.
func sampleFollowing(t *testing.T, s *kvstate.Store) (stopped func() bool) {
	t.Helper()
	var sawStop atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if !s.Following() {
				sawStop.Store(true)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return sawStop.Load
}

func bucketExists(e env) bool {
	_, err := e.js.KeyValue(e.ctx, kvstate.Bucket)
	return err == nil
}

// TestMirrorFollowsABucketCreatedAnew: when the bucket is deleted, the stores
// recreate it, stop following meanwhile, drop what the old bucket held, and
// follow the new one: a cooldown A opens afterwards reaches B.
func TestMirrorFollowsABucketCreatedAnew(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)
	p := policy(1, time.Minute)
	if err := a.RecordFailure(e.ctx, "old", serverFailure(p)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "B sees the first cooldown", func() bool { _, ok := b.CooldownForTest("old"); return ok })
	if !a.Following() || !b.Following() {
		t.Fatal("a started store is not following")
	}
	aStopped, bStopped := sampleFollowing(t, a), sampleFollowing(t, b)

	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the bucket recreated and both mirrors following it again", func() bool {
		return bucketExists(e) && aStopped() && bStopped() && a.Following() && b.Following()
	})
	for name, s := range map[string]*kvstate.Store{"A": a, "B": b} {
		if _, ok := s.CooldownForTest("old"); ok {
			t.Errorf("%s still holds the deleted bucket's cooldown", name)
		}
		if _, ok := s.Health("old"); ok {
			t.Errorf("%s still holds the deleted bucket's health", name)
		}
	}

	if err := a.RecordFailure(e.ctx, "new", serverFailure(p)); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	eventually(t, 5*time.Second, "B sees A's new cooldown", func() bool { _, ok := b.Cooling("new", time.Now()); return ok })
	if lag := time.Since(opened); lag > 100*time.Millisecond {
		t.Errorf("B saw the cooldown %v after A opened it, want within 100ms", lag)
	}
}

// TestFailureIsCountedWhileTheBucketIsGone: a failure recorded while the
// bucket is deleted recreates it and is counted there, so cooldowns keep
// working; the mirror's revision of the old bucket does not block the write.
func TestFailureIsCountedWhileTheBucketIsGone(t *testing.T) {
	e := setup(t)
	s := e.loaded(t, "proc", nil)
	p := policy(2, time.Minute)
	if err := s.RecordFailure(e.ctx, "p", serverFailure(p)); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFailure(e.ctx, "p", serverFailure(p)); err != nil {
		t.Fatalf("failure while the bucket is gone: %v", err)
	}
	if !bucketExists(e) {
		t.Fatal("the write did not recreate the bucket")
	}
	// The old count went with the old bucket: this is the first failure
	// of the new one, and it is in the mirror at once.
	if h, _ := getHealth(t, e, "p"); h.ConsecutiveFailures != 1 {
		t.Fatalf("stored failures = %d, want 1", h.ConsecutiveFailures)
	}
	if h, _ := s.Health("p"); h.ConsecutiveFailures != 1 {
		t.Fatalf("mirrored failures = %d, want 1", h.ConsecutiveFailures)
	}
	if err := s.RecordFailure(e.ctx, "p", serverFailure(p)); err != nil {
		t.Fatal(err)
	}
	if _, cooling := s.Cooling("p", time.Now()); !cooling {
		t.Fatal("the threshold reached on the new bucket opened no cooldown")
	}
	if _, err := e.kv.Get(e.ctx, kvstate.CooldownKey("p")); err != nil {
		t.Fatalf("cooldown key: %v", err)
	}
}

// TestProbeSuccessOnABucketCreatedAnewClosesTheCircuit is the stranded
// half-open provider: after the bucket was deleted and another processor
// created it anew, this store's successful probe finds no health to reset.
// Its mirror must drop the dead bucket's health instead of keeping the
// provider half-open (and skipped) for good.
func TestProbeSuccessOnABucketCreatedAnewClosesTheCircuit(t *testing.T) {
	e := setup(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	s := e.loaded(t, "proc", now)
	f := serverFailure(policy(1, time.Second))
	f.At = now()
	if err := s.RecordFailure(e.ctx, "p", f); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(2 * time.Second)) // the cooldown is over: half-open
	if st := s.State("p", now()); st != kvstate.StateHalfOpen {
		t.Fatalf("state %v, want half-open", st)
	}

	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	// Another processor's create, racing this store's own: the server may
	// refuse one of two at once, and the bucket is there all the same.
	eventually(t, 5*time.Second, "the bucket to be created anew", func() bool {
		_, err := kvstate.OpenBucket(e.ctx, e.js, 1)
		return err == nil
	})
	adm := s.Admit(e.ctx, "p", now(), time.Second)
	if !adm.Allowed || !adm.Probe {
		t.Fatalf("admission %+v, want the probe", adm)
	}
	if err := s.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseProbe(e.ctx, "p", adm.Lease); err != nil {
		t.Fatal(err)
	}
	if st := s.State("p", now()); st != kvstate.StateClosed {
		t.Fatalf("after the probe's success: state %v, want closed", st)
	}
	if adm := s.Admit(e.ctx, "p", now(), time.Second); !adm.Allowed || adm.Probe {
		t.Fatalf("after the probe's success: admission %+v, want a plain call", adm)
	}
}

// TestReadOnlyStoreWaitsForTheBucket: a store without js (status, watch)
// cannot recreate the bucket; it is not following while the bucket is gone
// and follows again once a processor recreates it.
func TestReadOnlyStoreWaitsForTheBucket(t *testing.T) {
	e := setup(t)
	s := kvstate.New(nil, e.kv, kvstate.Options{})
	kvstatetest.Follow(t, e.ctx, s)
	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the read-only store to stop following", func() bool { return !s.Following() })
	if _, err := e.js.KeyValue(e.ctx, kvstate.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a read-only store recreated the bucket (or the check failed): %v", err)
	}
	w := kvstate.New(e.js, e.kv, kvstate.Options{ID: "writer"})
	if err := w.RecordFailure(e.ctx, "p", chain.Failure{Class: chain.ClassServer, At: time.Now(), Policy: policy(1, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the read-only store to follow the new bucket", func() bool {
		_, ok := s.CooldownForTest("p")
		return s.Following() && ok
	})
}

// TestMirrorFollowsAfterServerRestart: the watcher's consumer is lost with a
// restarted server; the store watches again once it has reconnected, so a
// cooldown opened after the restart reaches its mirror (the client's own
// recovery of the watcher would take several silent seconds).
func TestMirrorFollowsAfterServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.StartWith(t, &server.Options{StoreDir: dir})
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := kvstate.New(js, kv, kvstate.Options{ID: "follower"})
	kvstatetest.Follow(t, ctx, s)
	stopped := sampleFollowing(t, s)

	srv.Shutdown()
	srv.WaitForShutdown()
	natstest.StartWith(t, &server.Options{StoreDir: dir, Port: port})
	eventually(t, 10*time.Second, "the store reconnected and following again", func() bool {
		return nc.IsConnected() && stopped() && s.Following()
	})

	w := kvstate.New(js, kv, kvstate.Options{ID: "writer"})
	if err := w.RecordFailure(ctx, "p", serverFailure(policy(1, time.Minute))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the follower sees a cooldown opened after the restart", func() bool {
		_, ok := s.Cooling("p", time.Now())
		return ok
	})
}

// TestRunAgainAfterRunReturned: Run stops following when its ctx ends, and
// a later Run reloads the mirror, so a cooldown opened in between reaches it.
func TestRunAgainAfterRunReturned(t *testing.T) {
	e := setup(t)
	s := e.loaded(t, "follower", time.Now)
	run := func(follow func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(e.ctx)
		ran := make(chan error, 1)
		go func() { ran <- s.Run(ctx) }()
		follow()
		cancel()
		if err := <-ran; err != nil {
			t.Fatalf("Run returned %v, want nil once its ctx ended", err)
		}
		if s.Following() {
			t.Fatal("following after Run returned")
		}
	}
	run(func() {
		eventually(t, 5*time.Second, "the first Run following", s.Following)
	})
	w := kvstate.New(e.js, e.kv, kvstate.Options{ID: "writer"})
	if err := w.RecordFailure(e.ctx, "p", serverFailure(policy(1, time.Minute))); err != nil {
		t.Fatal(err)
	}
	run(func() {
		eventually(t, 5*time.Second, "the second Run following, with the cooldown opened in between", func() bool {
			_, ok := s.CooldownForTest("p")
			return ok && s.Following()
		})
	})
}
