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

// The outage events an operator watches for.
const (
	// EventOpened: a cooldown started; no call goes to the provider.
	EventOpened EventKind = "opened"
	// EventExpired: the cooldown's TTL ran out; the provider is half-open.
	EventExpired EventKind = "expired"
	// EventProbe: a worker took the probe lease and sends one real request.
	EventProbe EventKind = "probe"
	// EventClosed: the provider succeeded after failures; traffic is back.
	EventClosed EventKind = "closed"
	// EventReset: an operator reset the provider (processor reset): its
	// cooldown ended and its failures and trips were cleared; the circuit
	// is closed.
	EventReset EventKind = "reset"
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
	switch {
	case e.Cooldown != nil && e.Cooldown.Operator:
		c := e.Cooldown
		fmt.Fprintf(&b, " until %s (%ds, by operator %s): %s", c.Until.UTC().Format(time.RFC3339), c.DurationS, c.By, c.Reason)
	case e.Cooldown != nil:
		c := e.Cooldown
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
	// An event with nothing after its kind (expired, closed) ends at the
	// kind, not at the padding of its column.
	return strings.TrimRight(b.String(), " ")
}

// WatchEvents reports the outage events of the bucket as they happen, until
// ctx ends. Only changes after the call are reported; the current values are
// read first so that a health reset is reported as closed only when it ends
// an outage (the provider had tripped and not succeeded since). The events
// of one recovery come in the order they happened: a cooldown ends at its
// until, and the server's expiry marker may come a moment after a
// processor has already taken the probe lease, so an expired event is
// reported, timed at the until, before the probe or closed event that
// shows the cooldown over, and the late marker is then not reported again.
// It fails only if the bucket cannot be watched at the start; a ctx that
// ends before then is a stop, and returns nil. A watch that
// ends later (the bucket deleted or created anew, a server restart) is
// opened again, with a growing pause between tries, and what changed
// meanwhile is reported then: the latest entry of each key newer than the
// last one read (a probe that came and went meanwhile is not seen), or, in
// a bucket created anew, the end of every outage of the old one, then
// every entry.
func WatchEvents(ctx context.Context, kv jetstream.KeyValue, report func(Event)) error {
	return watchEvents(ctx, kv, nil, nil, report)
}

// WatchEventsWithState is WatchEvents that first reports, as one EventState
// event each, the state of every provider the bucket holds and every one
// of known, as the values read at the start of the watch show it at the
// time now says (the NATS server's, for the command: processors judge by
// it).
func WatchEventsWithState(ctx context.Context, kv jetstream.KeyValue, known []string, now func() time.Time, report func(Event)) error {
	return watchEvents(ctx, kv, known, now, report)
}

func watchEvents(ctx context.Context, kv jetstream.KeyValue, known []string, now func() time.Time, report func(Event)) error {
	withState := now != nil
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
	created := w.created
	for tries := 0; ; {
		w.follow(ctx, nil, func(e jetstream.KeyValueEntry) {
			if e == nil {
				if !live && withState {
					for _, ev := range t.states(now(), known) {
						report(ev)
					}
				}
				live = true
				return
			}
			if e.Revision() <= seen {
				return // read before this watch began
			}
			seen = e.Revision()
			for _, ev := range t.events(e) {
				if live {
					report(ev)
				}
			}
		}, nil)
		w.stop()
		for {
			if wait.Sleep(ctx, retryPause(tries)) != nil {
				return nil
			}
			if w, err = openWatch(ctx, kv, nil); err == nil {
				break
			}
			tries++
		}
		tries = 0
		if !w.created.Equal(created) {
			// Revisions start over in a new bucket, and the old one's
			// health and cooldowns are gone with it: its outages ended.
			for _, ev := range t.bucketGone(w.created) {
				if live {
					report(ev)
				}
			}
			created, seen = w.created, 0
			t = newTracker()
		}
	}
}
