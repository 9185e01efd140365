package coalesce_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourhq/detour/internal/coalesce"
)

// TestManyCallersMakeOneRun: fifty callers that find the same gap at once
// cause one run, and all get its error; a caller within Every of it reuses
// that error without running.
func TestManyCallersMakeOneRun(t *testing.T) {
	g := coalesce.Gate{Every: time.Hour}
	var runs atomic.Int32
	release := make(chan struct{})
	boom := errors.New("boom")
	f := func(context.Context) error {
		runs.Add(1)
		<-release
		return boom
	}
	var wg sync.WaitGroup
	var entered atomic.Int32
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); entered.Add(1); errs <- g.Do(context.Background(), f) }()
	}
	// While the first run is held, every other caller waits for it rather
	// than running f itself (Every cannot help them: no run has ended).
	for entered.Load() < 50 || runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs at once while the first was held, want 1", n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("caller got %v, want the run's error", err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// TestRunsAgainAfterEvery: once Every has passed since the last run ended,
// the next call runs again.
func TestRunsAgainAfterEvery(t *testing.T) {
	g := coalesce.Gate{Every: 20 * time.Millisecond}
	var runs atomic.Int32
	f := func(context.Context) error { runs.Add(1); return nil }
	_ = g.Do(context.Background(), f)
	_ = g.Do(context.Background(), f)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs within Every, want 1", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no second run after Every passed")
		}
		time.Sleep(5 * time.Millisecond)
		_ = g.Do(context.Background(), f)
	}
}

// TestWaiterLeavesRunGoesOn: a caller that waits on another's run returns
// when its own context ends, and the run still finishes for its starter.
func TestWaiterLeavesRunGoesOn(t *testing.T) {
	var g coalesce.Gate
	started := make(chan struct{})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- g.Do(context.Background(), func(ctx context.Context) error {
			close(started)
			<-release
			return ctx.Err()
		})
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Do(ctx, func(context.Context) error { t.Error("second run while one is in progress"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter got %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("run got %v, want nil: it must not inherit a caller's cancellation", err)
	}
}

// TestTimeoutBoundsARun: a run that outlasts Timeout sees its context end.
func TestTimeoutBoundsARun(t *testing.T) {
	g := coalesce.Gate{Timeout: 10 * time.Millisecond}
	err := g.Do(context.Background(), func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
}
