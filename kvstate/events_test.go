package kvstate_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
)

// TestOutageEventsAndStatus follows one outage through the bucket as an
// operator sees it: `watch` reports opened, expired, probe and closed in
// that order, and `status` shows the circuit open, half-open, then closed.
func TestOutageEventsAndStatus(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc-1", nil)
	events := make(chan kvstate.Event, 16)
	go func() { _ = kvstate.WatchEvents(e.ctx, e.kv, nil, nil, func(ev kvstate.Event) { events <- ev }) }()
	next := func(want kvstate.EventKind) kvstate.Event {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Kind != want || ev.Provider != "p" {
				t.Fatalf("event %+v, want %s of p", ev, want)
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", want)
			return kvstate.Event{}
		}
	}
	time.Sleep(100 * time.Millisecond) // let the watcher subscribe

	if err := s.RecordFailure(e.ctx, "p", serverFailure(policy(1, time.Second))); err != nil {
		t.Fatal(err)
	}
	opened := next(kvstate.EventOpened)
	if opened.Cooldown == nil || opened.Cooldown.DurationS != 1 || opened.Cooldown.By != "proc-1" {
		t.Fatalf("opened event %+v", opened)
	}
	if !strings.Contains(opened.String(), "opened") || !strings.Contains(opened.String(), "trip 1") {
		t.Fatalf("event line %q", opened.String())
	}
	var table bytes.Buffer
	if err := kvstate.WriteStatus(&table, s.Status(time.Now())); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "open") || !strings.Contains(table.String(), "503 Service Unavailable") {
		t.Fatalf("status while cooling:\n%s", table.String())
	}

	expired := next(kvstate.EventExpired)
	if line := expired.String(); !strings.HasSuffix(line, "expired") {
		t.Errorf("expired event line %q: want it to end at its kind", line)
	}
	eventually(t, 2*time.Second, "the mirror to see the expiry", func() bool {
		return s.State("p", time.Now()) == kvstate.StateHalfOpen
	})
	if rows := s.Status(time.Now()); len(rows) != 1 || rows[0].State != kvstate.StateHalfOpen || !rows[0].CooldownUntil.IsZero() {
		t.Fatalf("status after expiry: %+v", rows)
	}
	if adm := s.Admit(e.ctx, "p", time.Now(), time.Second); !adm.Probe {
		t.Fatalf("half-open provider not admitted as a probe: %+v", adm)
	}
	if probe := next(kvstate.EventProbe); probe.Probe == nil || probe.Probe.By != "proc-1" {
		t.Fatalf("probe event %+v", probe)
	}
	if err := s.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	next(kvstate.EventClosed)

	// A failure below the threshold and a success after it are no outage:
	// no closed event without an opened one.
	if err := s.RecordFailure(e.ctx, "p", serverFailure(policy(5, time.Second))); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSuccess(e.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		t.Fatalf("event %+v for a failure that tripped nothing", ev)
	case <-time.After(500 * time.Millisecond):
	}
	if rows := s.Status(time.Now()); rows[0].State != kvstate.StateClosed || rows[0].ConsecutiveFailures != 0 || rows[0].Trips != 1 {
		t.Fatalf("status after recovery: %+v", rows)
	}
}

// TestWatchEventsResumesOnABucketCreatedAnew: `processor watch` does not go
// quiet when the bucket is deleted; a cooldown opened in the new bucket is
// reported.
func TestWatchEventsResumesOnABucketCreatedAnew(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc", nil)
	events := make(chan kvstate.Event, 16)
	watching := make(chan error, 1)
	go func() {
		watching <- kvstate.WatchEvents(e.ctx, e.kv, nil, nil, func(ev kvstate.Event) { events <- ev })
	}()
	next := func(provider string) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if strings.HasPrefix(ev.Provider, "before-") {
					continue // late news of the warm-up below
				}
				if ev.Kind != kvstate.EventOpened || ev.Provider != provider {
					t.Fatalf("event %+v, want opened of %s", ev, provider)
				}
				return
			case err := <-watching:
				t.Fatalf("WatchEvents ended: %v", err)
			case <-time.After(15 * time.Second):
				t.Fatalf("no event for %s", provider)
			}
		}
	}
	// An event reported shows the watch is live; one opened before it was
	// would not be reported, so open cooldowns until one is.
	n := 0
	eventually(t, 10*time.Second, "the watch reporting", func() bool {
		n++
		if err := s.RecordFailure(e.ctx, fmt.Sprintf("before-%d", n), serverFailure(policy(1, time.Minute))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-events:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the store following a new bucket", func() bool { return bucketExists(e) && s.Following() })

	// The watch resumes within its check interval and pauses; until it
	// has, an event could be missed only if it were older than the watch,
	// and the new watch reports everything of a new bucket.
	if err := s.RecordFailure(e.ctx, "p", serverFailure(policy(1, time.Minute))); err != nil {
		t.Fatal(err)
	}
	next("p")
}

// TestWatchStoppedWhileStartingIsNoFailure: a stop (Ctrl-C on processor
// watch) that comes while the watch still opens returns nil, not the
// canceled check of the bucket.
func TestWatchStoppedWhileStartingIsNoFailure(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	kv, err := kvstate.OpenBucket(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := kvstate.WatchEvents(ctx, kv, nil, nil, func(kvstate.Event) {}); err != nil {
		t.Fatalf("WatchEvents stopped while starting: %v, want nil", err)
	}
}

// TestWatchEventsEndTheOutagesOfADeletedBucket: a bucket deleted while a
// provider cools takes the outage with it, and processors call the
// provider again at once. The watch, resuming on the bucket created anew,
// reports that outage over: expired, then closed.
func TestWatchEventsEndTheOutagesOfADeletedBucket(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc", nil)
	events := make(chan kvstate.Event, 64)
	go func() { _ = kvstate.WatchEvents(e.ctx, e.kv, nil, nil, func(ev kvstate.Event) { events <- ev }) }()
	// Opened is reported once the watch is live: trip until it is.
	n := 0
	eventually(t, 10*time.Second, "the watch reporting", func() bool {
		n++
		if err := s.RecordFailure(e.ctx, fmt.Sprintf("p%d", n), serverFailure(policy(1, time.Hour))); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-events:
			return ev.Kind == kvstate.EventOpened
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	cooling := fmt.Sprintf("p%d", n) // its opened event was reported
	if err := e.js.DeleteKeyValue(e.ctx, kvstate.Bucket); err != nil {
		t.Fatal(err)
	}
	var got []kvstate.EventKind
	for len(got) < 2 {
		select {
		case ev := <-events:
			if ev.Provider == cooling {
				got = append(got, ev.Kind)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("events of %s after the bucket was deleted: %v, want expired and closed", cooling, got)
		}
	}
	if got[0] != kvstate.EventExpired || got[1] != kvstate.EventClosed {
		t.Fatalf("events of %s after the bucket was deleted: %v, want expired, closed", cooling, got)
	}
}

// TestWriteStatusOfAnEmptyBucket: with no state in the bucket (none yet,
// or an outage ended by hand), status says every provider is closed, with
// no word of what came before.
func TestWriteStatusOfAnEmptyBucket(t *testing.T) {
	var b strings.Builder
	if err := kvstate.WriteStatus(&b, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "no provider state recorded: every provider is closed\n"; got != want {
		t.Fatalf("status of an empty bucket %q, want %q", got, want)
	}
}
