package kvstate

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
)

// EventState is not a change: it is a provider's state when a watch
// began (see WatchEvents).
const EventState EventKind = "state"

// tracker turns bucket entries into outage events in the order they
// happened. It holds each provider's last health, so that a health reset is
// closed only when it ends an outage, and the cooldowns whose end has not
// been reported.
type tracker struct {
	health  map[string]Health
	cooling map[string]Cooldown
	// deleted: cooldown key deleted by hand while the health's trip runs.
	deleted map[string]bool
	// closing: health deleted by hand while the cooldown key runs; the
	// circuit closes when the cooldown ends.
	closing map[string]bool
}

func newTracker() *tracker {
	return &tracker{health: map[string]Health{}, cooling: map[string]Cooldown{}, deleted: map[string]bool{}, closing: map[string]bool{}}
}

// events returns the events entry e makes, oldest first: none, one, or an
// expired event the server's marker has not brought yet followed by the
// probe or closed event that shows the cooldown over.
func (t *tracker) events(e jetstream.KeyValueEntry) []Event {
	provider, kind, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return nil
	}
	ev := Event{Time: e.Created(), Provider: provider}
	put := e.Operation() == jetstream.KeyValuePut
	switch {
	case kind == SuffixCooldown && put:
		c, err := decode[Cooldown](e.Value())
		if err != nil || resetEnds(c, t.health[provider]) {
			return nil // a trip that raced the last reset: over already
		}
		// One that ended before this opened, unreported when a watch
		// resumed after both.
		out := t.ended(provider, ev.Time)
		t.cooling[provider] = c
		delete(t.deleted, provider)
		ev.Kind, ev.Cooldown = EventOpened, &c
		return append(out, ev)
	case kind == SuffixCooldown:
		c, open := t.cooling[provider]
		if !open {
			return nil // its end was reported when the probe came first
		}
		// The server's marker of an expired key is a purge; a delete is by
		// hand, and the trip in .health keeps the cooldown running then.
		byHand := e.Operation() == jetstream.KeyValueDelete && ev.Time.Before(c.Until)
		if byHand && tripRunning(t.health[provider], chain.CooldownPolicy{}, ev.Time) {
			t.deleted[provider] = true
			return nil
		}
		return t.end(provider, ev.Time)
	case kind == SuffixProbe && put:
		p, err := decode[Probe](e.Value())
		if err != nil {
			return nil
		}
		ev.Kind, ev.Probe = EventProbe, &p
		return append(t.ended(provider, ev.Time), ev)
	case kind == SuffixHealth && !put:
		return t.healthDeleted(provider, ev.Time)
	case kind == SuffixHealth && put:
		h, err := decode[Health](e.Value())
		if err != nil {
			return nil
		}
		delete(t.closing, provider)
		before, known := t.health[provider]
		t.health[provider] = h
		if !h.ResetAt.IsZero() && !h.ResetAt.Equal(before.ResetAt) {
			// One event: the cooldown key's deletion reports nothing.
			delete(t.cooling, provider)
			delete(t.deleted, provider)
			ev.Kind, ev.By = EventReset, h.ResetBy
			return []Event{ev}
		}
		// Closed only if it was tripped and is no more (an operator's
		// trip counts no failure).
		if h.ConsecutiveFailures != 0 || halfOpen(h) || !known || !halfOpen(before) {
			return nil
		}
		ev.Kind = EventClosed
		return append(t.ended(provider, ev.Time), ev)
	}
	return nil
}

// healthDeleted returns the events of provider's health deleted by hand
// at at: the circuit closes, unless a cooldown key still runs. A cooldown
// whose key was deleted before ends with it.
func (t *tracker) healthDeleted(provider string, at time.Time) []Event {
	before, known := t.health[provider]
	delete(t.health, provider)
	_, open := t.cooling[provider]
	if open && !t.deleted[provider] {
		t.closing[provider] = known && halfOpen(before)
		return nil
	}
	var out []Event
	if open {
		out = t.end(provider, at)
	}
	if known && halfOpen(before) {
		out = append(out, Event{Time: at, Provider: provider, Kind: EventClosed})
	}
	return out
}

// ended returns the expired event of provider's cooldown if it ran out by
// at, when a probe or a success shows it over before its marker.
func (t *tracker) ended(provider string, at time.Time) []Event {
	c, open := t.cooling[provider]
	if !open || c.Until.After(at) {
		return nil
	}
	return t.end(provider, c.Until)
}

// bucketGone returns the events of the bucket deleted, learned at at: every
// cooldown tracked expires, and every half-open provider is closed.
func (t *tracker) bucketGone(at time.Time) []Event {
	var out []Event
	for _, p := range t.names(nil) {
		if _, open := t.cooling[p]; open {
			out = append(out, t.end(p, at)...)
		}
		if h, ok := t.health[p]; ok && halfOpen(h) {
			out = append(out, Event{Time: at, Provider: p, Kind: EventClosed})
		}
	}
	return out
}

// end reports and forgets the end of provider's cooldown, known at at and
// timed at its until when that came first; closed too when its health was
// deleted meanwhile.
func (t *tracker) end(provider string, at time.Time) []Event {
	c, closing := t.cooling[provider], t.closing[provider]
	delete(t.cooling, provider)
	delete(t.deleted, provider)
	delete(t.closing, provider)
	if !c.Until.IsZero() && c.Until.Before(at) {
		at = c.Until
	}
	out := []Event{{Time: at, Provider: provider, Kind: EventExpired}}
	if closing {
		out = append(out, Event{Time: at, Provider: provider, Kind: EventClosed})
	}
	return out
}

// states returns an EventState event for every provider tracked and every
// one of known, sorted by name, as the values read so far show them at now.
func (t *tracker) states(now time.Time, known []string) []Event {
	return lo.Map(t.names(known), func(p string, _ int) Event {
		var cooling *Cooldown
		if c, ok := t.cooling[p]; ok {
			cooling = &c
		}
		row := statusOf(p, t.health[p], cooling, now)
		return Event{Time: now.UTC(), Provider: p, Kind: EventState, State: &row}
	})
}

// names returns known and every provider tracked, sorted, each once.
func (t *tracker) names(known []string) []string {
	names := slices.Concat(known, slices.Collect(maps.Keys(t.health)), slices.Collect(maps.Keys(t.cooling)))
	slices.Sort(names)
	return slices.Compact(names)
}
