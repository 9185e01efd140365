package supervise_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/supervise"
)

// journal records the order in which parts saw their context end and
// returned.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

// part waits for its context, notes that, and returns err; started is
// released once it runs.
func (j *journal) part(name string, started *sync.WaitGroup, err error) supervise.Part {
	started.Add(1)
	return func(ctx context.Context) error {
		started.Done()
		<-ctx.Done()
		j.add(name)
		return err
	}
}

// TestInnerStagesStopFirst: when ctx ends, the inner stage's parts return
// before the outer stage's context ends, and Run returns after all.
func TestInnerStagesStopFirst(t *testing.T) {
	var j journal
	var started sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	outer := []supervise.Part{j.part("outer", &started, nil)}
	middle := []supervise.Part{j.part("middle", &started, nil)}
	inner := []supervise.Part{func(ctx context.Context) error {
		<-ctx.Done()
		// A drain that takes a while: the outer stages must still be
		// running when it is over, not merely be stopped after it began.
		time.Sleep(50 * time.Millisecond)
		j.add("inner")
		return nil
	}}
	done := make(chan error, 1)
	go func() { done <- supervise.Run(ctx, outer, middle, inner) }()
	started.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := j.get(), []string{"inner", "middle", "outer"}; !slices.Equal(got, want) {
		t.Fatalf("stopped in order %v, want %v", got, want)
	}
}

// TestAFailingPartStopsEveryStage: a part of an outer stage that fails
// stops the inner stage first and then its own, and Run returns its error;
// a part failing as it stops is reported after it.
func TestAFailingPartStopsEveryStage(t *testing.T) {
	var j journal
	var started sync.WaitGroup
	mirrorLost := errors.New("mirror lost")
	drainFailed := errors.New("drain failed")
	outer := []supervise.Part{
		func(context.Context) error { started.Wait(); j.add("mirror"); return mirrorLost },
		j.part("clock", &started, nil),
	}
	inner := []supervise.Part{j.part("consume", &started, drainFailed)}
	err := supervise.Run(t.Context(), outer, inner)
	if !errors.Is(err, mirrorLost) || !errors.Is(err, drainFailed) {
		t.Fatalf("Run: %v, want both errors", err)
	}
	if err.Error() != "mirror lost\ndrain failed" {
		t.Errorf("Run: %q, want the errors in the order they happened", err)
	}
	if got, want := j.get(), []string{"mirror", "consume", "clock"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestAPartThatEndsQuietlyStopsNothing: a part that returns nil before its
// context ends leaves the others running until ctx ends.
func TestAPartThatEndsQuietlyStopsNothing(t *testing.T) {
	var j journal
	var started sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	quiet := make(chan struct{})
	inner := []supervise.Part{
		func(context.Context) error { defer close(quiet); return nil },
		j.part("consume", &started, nil),
	}
	done := make(chan error, 1)
	go func() { done <- supervise.Run(ctx, []supervise.Part{j.part("mirror", &started, nil)}, inner) }()
	started.Wait()
	<-quiet
	if got := j.get(); len(got) != 0 {
		t.Fatalf("%v stopped after a quiet return", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := j.get(), []string{"consume", "mirror"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestAFailingInnerPartStopsEveryStage: a part of the inner stage that
// fails by itself stops the rest of its stage, whose parts see its error as
// their context's cause, and only then the outer stage; Run returns that
// error first, before one an outer part returns as it stops.
func TestAFailingInnerPartStopsEveryStage(t *testing.T) {
	var j journal
	var started sync.WaitGroup
	askFailed := errors.New("ask failed")
	mirrorStopped := errors.New("mirror stopped badly")
	var cause error
	inner := []supervise.Part{
		func(context.Context) error { started.Wait(); j.add("ask"); return askFailed },
		func(ctx context.Context) error {
			started.Done()
			<-ctx.Done()
			cause = context.Cause(ctx)
			time.Sleep(50 * time.Millisecond) // draining
			j.add("consume")
			return nil
		},
	}
	started.Add(1)
	outer := []supervise.Part{j.part("mirror", &started, mirrorStopped)}
	err := supervise.Run(t.Context(), outer, inner)
	if err == nil || err.Error() != "ask failed\nmirror stopped badly" {
		t.Fatalf("Run: %v, want the inner error first, then the outer one", err)
	}
	if !errors.Is(cause, askFailed) {
		t.Errorf("the consume part saw cause %v, want %v", cause, askFailed)
	}
	if got, want := j.get(), []string{"ask", "consume", "mirror"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
