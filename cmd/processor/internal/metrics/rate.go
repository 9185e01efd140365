package metrics

import (
	"sync"
	"time"
)

// rateWindow is how far back Rates looks, in seconds.
const rateWindow = 60

// rates counts answers in a ring of one-second buckets: the window's and
// the current second's.
type rates struct {
	mu      sync.Mutex
	buckets [rateWindow + 1]rateBucket
}

type rateBucket struct {
	sec                int64 // Unix second the counts belong to
	answered, degraded int
}

// add counts one answer at now.
func (r *rates) add(now time.Time, degraded bool) {
	sec := now.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.buckets[sec%(rateWindow+1)]
	if b.sec != sec {
		*b = rateBucket{sec: sec}
	}
	b.answered++
	if degraded {
		b.degraded++
	}
}

// Rates returns the answers per second over the last minute and the share
// degraded (0 to 1), for the status page: over the rateWindow seconds
// before now's, which is still filling.
func (m *Metrics) Rates(now time.Time) (perSecond, degradedShare float64) {
	if m == nil {
		return 0, 0
	}
	sec := now.Unix()
	m.rates.mu.Lock()
	defer m.rates.mu.Unlock()
	answered, degraded := 0, 0
	for _, b := range m.rates.buckets {
		if b.sec < sec && b.sec >= sec-rateWindow {
			answered += b.answered
			degraded += b.degraded
		}
	}
	if answered == 0 {
		return 0, 0
	}
	return float64(answered) / rateWindow, float64(degraded) / float64(answered)
}
