package kvstate_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/kvstate"
)

// TestOutageEventsAndStatus follows one outage through the bucket as an
// operator sees it: `watch` reports opened, expired, probe and closed in
// that order, and `status` shows the circuit open, half-open, then closed.
func TestOutageEventsAndStatus(t *testing.T) {
	e := setup(t)
	s := e.store(t, "proc-1", nil)
	events := make(chan kvstate.Event, 16)
	go func() { _ = kvstate.WatchEvents(e.ctx, e.kv, func(ev kvstate.Event) { events <- ev }) }()
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

	next(kvstate.EventExpired)
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
