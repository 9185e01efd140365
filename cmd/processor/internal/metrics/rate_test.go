package metrics_test

import (
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/metrics"
)

// TestRates counts answers of the last minute, the current second left
// out, and the share of them degraded.
func TestRates(t *testing.T) {
	m := metrics.New()
	t0 := time.Unix(1_000_000, 0)
	if ps, share := m.Rates(t0); ps != 0 || share != 0 {
		t.Fatalf("no answers: %v/s, %v degraded", ps, share)
	}
	for i := range 120 { // two a second for a minute, one in four degraded
		m.Answered("default", time.Second, t0.Add(time.Duration(i)*500*time.Millisecond), i%4 == 0)
	}
	now := t0.Add(60 * time.Second)
	if ps, share := m.Rates(now); ps != 2 || share != 0.25 {
		t.Errorf("after a minute: %v/s, %v degraded; want 2/s, 0.25", ps, share)
	}
	// Answers in the current second wait for it to end.
	m.Answered("default", time.Second, now, true)
	if ps, _ := m.Rates(now); ps != 2 {
		t.Errorf("current second counted: %v/s", ps)
	}
	// Half a minute later, half of them have left the window.
	if ps, _ := m.Rates(now.Add(30 * time.Second)); ps != 1+1.0/60 {
		t.Errorf("30s later: %v/s, want %v", ps, 1+1.0/60)
	}
	if ps, share := m.Rates(now.Add(2 * time.Minute)); ps != 0 || share != 0 {
		t.Errorf("two minutes later: %v/s, %v degraded; want zeros", ps, share)
	}
	var none *metrics.Metrics
	none.Answered("default", time.Second, now, false)
	if ps, _ := none.Rates(now); ps != 0 {
		t.Errorf("nil Metrics: %v/s", ps)
	}
}
