package kvstate

import (
	"context"
	"encoding/json"
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
)

// Event is one outage event, read from the bucket.
type Event struct {
	Time     time.Time `json:"time"`
	Provider string    `json:"provider"`
	Kind     EventKind `json:"event"`
	// Cooldown is set for opened events, Probe for probe events.
	Cooldown *Cooldown `json:"cooldown,omitempty"`
	Probe    *Probe    `json:"probe,omitempty"`
}

// String formats the event on one line for a terminal.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-16s %-8s", e.Time.UTC().Format(time.RFC3339), e.Provider, e.Kind)
	switch {
	case e.Cooldown != nil:
		c := e.Cooldown
		fmt.Fprintf(&b, " until %s (%ds, trip %d, %s): %s", c.Until.UTC().Format(time.RFC3339), c.DurationS, c.Trip, c.Class, c.Reason)
	case e.Probe != nil:
		fmt.Fprintf(&b, " by %s", e.Probe.By)
	}
	return b.String()
}

// WatchEvents reports the outage events of the bucket as they happen, until
// ctx ends. Only changes after the call are reported; the current values are
// read first so that a health reset is reported as closed only when it ends
// an outage (the provider had tripped and not succeeded since). It fails only
// if the bucket cannot be watched at the start. A watch that ends later (the
// bucket deleted or created anew, a server restart) is opened again, with a
// growing pause between tries, and what changed meanwhile is reported then:
// every entry newer than the last one read, or, in a bucket created anew,
// every entry.
func WatchEvents(ctx context.Context, kv jetstream.KeyValue, report func(Event)) error {
	w, err := openWatch(ctx, kv, nil)
	if err != nil {
		return err
	}
	health := map[string]Health{}
	var seen uint64 // revision of the newest entry read from this bucket
	live := false   // set once the current values at the call have been read
	created := w.created
	for tries := 0; ; {
		w.follow(ctx, nil, func(e jetstream.KeyValueEntry) {
			if e == nil {
				live = true
				return
			}
			if e.Revision() <= seen {
				return // read before this watch began
			}
			seen = e.Revision()
			if ev, isEvent := eventOf(e, health); isEvent && live {
				report(ev)
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
			// health is gone with it.
			created, seen = w.created, 0
			clear(health)
		}
	}
}

// eventOf turns a bucket entry into an outage event, if it is one. health
// holds each provider's last health value, which eventOf keeps current.
func eventOf(e jetstream.KeyValueEntry, health map[string]Health) (Event, bool) {
	provider, kind, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return Event{}, false
	}
	ev := Event{Time: e.Created(), Provider: provider}
	put := e.Operation() == jetstream.KeyValuePut
	switch {
	case kind == SuffixCooldown && put:
		var c Cooldown
		if json.Unmarshal(e.Value(), &c) != nil {
			return Event{}, false
		}
		ev.Kind, ev.Cooldown = EventOpened, &c
	case kind == SuffixCooldown:
		ev.Kind = EventExpired
	case kind == SuffixProbe && put:
		var p Probe
		if json.Unmarshal(e.Value(), &p) != nil {
			return Event{}, false
		}
		ev.Kind, ev.Probe = EventProbe, &p
	case kind == SuffixHealth && put:
		var h Health
		if json.Unmarshal(e.Value(), &h) != nil {
			return Event{}, false
		}
		before, known := health[provider]
		health[provider] = h
		// A reset of the failures closes the circuit only if it was open
		// or half-open: tripped, and no success since.
		if h.ConsecutiveFailures != 0 || !known || !halfOpen(before) {
			return Event{}, false
		}
		ev.Kind = EventClosed
	default:
		return Event{}, false
	}
	return ev, true
}
