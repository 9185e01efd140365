package stream

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Health is what the pulls and result stores last saw, for /readyz: a
// failed pull or store makes Err say so until a later one works. The zero
// value is healthy; a nil *Health records nothing. Its methods are safe for
// concurrent use.
type Health struct {
	mu      sync.Mutex
	pulls   map[string]error // chains whose last pull failed, and why
	results error            // why the last result store failed; nil after a success
}

// Err returns why the processor cannot work, or nil when it can.
func (h *Health) Err() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range slices.Sorted(maps.Keys(h.pulls)) {
		errs = append(errs, fmt.Errorf("pulling requests of chain %s: %w", c, h.pulls[c]))
	}
	if h.results != nil {
		errs = append(errs, fmt.Errorf("storing results: %w", h.results))
	}
	return errors.Join(errs...)
}

// pulled records one pull of chain and reports whether it changed the
// chain's state.
func (h *Health) pulled(chain string, err error) (changed bool) {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, failing := h.pulls[chain]
	if err == nil {
		delete(h.pulls, chain)
		return failing
	}
	if h.pulls == nil {
		h.pulls = map[string]error{}
	}
	h.pulls[chain] = err
	return !failing
}

// stored records one result store and reports whether it changed the state.
func (h *Health) stored(err error) (changed bool) {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	changed = (h.results == nil) != (err == nil)
	h.results = err
	return changed
}
