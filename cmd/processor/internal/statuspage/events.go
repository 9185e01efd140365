package statuspage

import (
	"slices"
	"sync"

	"github.com/detourhq/detour/kvstate"
)

// Events keeps the latest outage events for the page. The zero value
// keeps none; use NewEvents.
type Events struct {
	mu   sync.Mutex
	max  int
	last []kvstate.Event
}

// NewEvents keeps the latest n events.
func NewEvents(n int) *Events { return &Events{max: n} }

// Add records e, dropping the oldest beyond the limit. It suits
// kvstate.WatchEvents's report function.
func (e *Events) Add(ev kvstate.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last = append(e.last, ev)
	if len(e.last) > e.max {
		e.last = slices.Delete(e.last, 0, len(e.last)-e.max)
	}
}

// Latest returns the events kept, oldest first.
func (e *Events) Latest() []kvstate.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.last)
}
