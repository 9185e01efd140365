package kvstate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/wait"
)

// EventKind is what happened to a provider's circuit.
type EventKind string

// The outage events an operator watches for (docs/state.md).
const (
	EventOpened  EventKind = "opened"  // a cooldown started
	EventExpired EventKind = "expired" // the cooldown ended: half-open
	EventProbe   EventKind = "probe"   // a worker took the probe lease
	EventClosed  EventKind = "closed"  // a success after failures: traffic is back
	EventReset   EventKind = "reset"   // an operator reset the provider: closed
)

// Event is one outage event, read from the bucket.
type Event struct {
	Time     time.Time `json:"time"`
	Provider string    `json:"provider"`
	Kind     EventKind `json:"event"`
	// Cooldown is set for opened events, Probe for probe events, State for
	// state events.
	Cooldown *Cooldown       `json:"cooldown,omitempty"`
	Probe    *Probe          `json:"probe,omitempty"`
	State    *ProviderStatus `json:"state,omitempty"`
	// By names the operator (user@host) of a reset event.
	By string `json:"by,omitempty"`
}

// String formats the event on one line for a terminal.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-16s %-8s", e.Time.UTC().Format(time.RFC3339), e.Provider, e.Kind)
	switch c := e.Cooldown; {
	case c != nil && c.Operator:
		fmt.Fprintf(&b, " until %s (%ds, by operator %s): %s", c.Until.UTC().Format(time.RFC3339), c.DurationS, c.By, c.Reason)
	case c != nil:
		fmt.Fprintf(&b, " until %s (%ds, trip %d, %s): %s", c.Until.UTC().Format(time.RFC3339), c.DurationS, c.Trip, c.Class, c.Reason)
	case e.Kind == EventReset:
		fmt.Fprintf(&b, " by %s", e.By)
	case e.Probe != nil:
		fmt.Fprintf(&b, " by %s", e.Probe.By)
	case e.State != nil:
		r := e.State
		fmt.Fprintf(&b, " %s", r.State)
		if !r.CooldownUntil.IsZero() {
			fmt.Fprintf(&b, " until %s", r.CooldownUntil.UTC().Format(time.RFC3339))
		}
		if c := r.Cooldown; c != nil && c.Operator && !r.CooldownUntil.IsZero() {
			fmt.Fprintf(&b, " (tripped by operator %s: %s)", c.By, c.Reason)
		}
		fmt.Fprintf(&b, ", %d failures, %d trips", r.ConsecutiveFailures, r.Trips)
		if r.LastError != "" {
			fmt.Fprintf(&b, ", last error: %s", r.LastError)
		}
	}
	// An event with nothing after its kind ends there, not at the padding.
	return strings.TrimRight(b.String(), " ")
}

// WatchEvents reports the outage events of the bucket after the call, in
// the order they happened (docs/state.md, "Watching outages"), until ctx
// ends. It fails only if the bucket cannot be watched at the start (a ctx
// ended by then returns nil). A watch that ends later is opened again and
// what changed meanwhile reported: the latest entry of each key, or, in a
// bucket created anew, the end of every outage of the old one first.
//
// Before the events, unless now is nil, it reports, as one EventState event
// each, the state of every provider the bucket holds and of known, as the
// values read at the start show it at now (the NATS server's time, by which
// processors judge).
func WatchEvents(ctx context.Context, kv jetstream.KeyValue, known []string, now func() time.Time, report func(Event)) error {
	w, err := openWatch(ctx, kv, nil)
	if err != nil && ctx.Err() != nil {
		return nil // stopped while starting (Ctrl-C): a stop, not a failure
	}
	if err != nil {
		return err
	}
	t := newTracker()
	var seen uint64 // revision of the newest entry read from this bucket
	live := false   // set once the current values at the call have been read
	emit := func(events []Event) {
		for _, ev := range events {
			if live {
				report(ev)
			}
		}
	}
	created := w.created
	for {
		w.follow(ctx, nil, func(e jetstream.KeyValueEntry) {
			switch {
			case e == nil && !live && now != nil:
				live = true
				emit(t.states(now(), known))
			case e == nil:
				live = true
			case e.Revision() > seen: // not read before this watch began
				seen = e.Revision()
				emit(t.events(e))
			}
		}, nil)
		w.stop()
		for tries := 0; ; tries++ {
			if wait.Sleep(ctx, retryPause(tries)) != nil {
				return nil
			}
			if w, err = openWatch(ctx, kv, nil); err == nil {
				break
			}
		}
		if !w.created.Equal(created) { // the old bucket's outages ended with it
			emit(t.bucketGone(w.created))
			created, seen = w.created, 0
			t = newTracker()
		}
	}
}
