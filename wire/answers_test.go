package wire_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/wire"
)

// TestAResultAnswersTheMessageItNames: a result answers the request message
// of its sequence and stored time, not another of the same sequence (a
// requests stream created again); a client that knows only the sequence,
// or a result that records no time, goes by the sequence.
func TestAResultAnswersTheMessageItNames(t *testing.T) {
	stored := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	h := nats.Header{}
	wire.MarkAnswers(h, 7, stored)
	if got := h.Get(wire.HeaderRequestTime); got != "2026-12-01T09:00:00.123456789Z" {
		t.Errorf("%s = %q, want the time in UTC with its nanoseconds", wire.HeaderRequestTime, got)
	}
	added := nats.Header{}
	wire.MarkAnswers(added, 7, stored)
	added.Add(wire.HeaderRequestSeq, "8") // must not write over the time
	if got := added.Get(wire.HeaderRequestTime); got != h.Get(wire.HeaderRequestTime) {
		t.Errorf("adding a value to %s changed %s to %q", wire.HeaderRequestSeq, wire.HeaderRequestTime, got)
	}
	untimed := nats.Header{wire.HeaderRequestSeq: {"7"}}
	// Another writer may keep the fraction's trailing zeros, or send a time
	// that is none.
	zeros := nats.Header{wire.HeaderRequestSeq: {"7"}, wire.HeaderRequestTime: {"2026-12-01T09:00:00.100000000Z"}}
	garbled := nats.Header{wire.HeaderRequestSeq: {"7"}, wire.HeaderRequestTime: {"yesterday"}}
	for _, tt := range []struct {
		name   string
		h      nats.Header
		seq    uint64
		stored time.Time
		want   bool
	}{
		{"its own message", h, 7, stored, true},
		{"its own message, in another zone", h, 7, stored.UTC(), true},
		{"another sequence", h, 8, stored, false},
		{"the same sequence stored at another time", h, 7, stored.Add(time.Nanosecond), false},
		{"the sequence alone", h, 7, time.Time{}, true},
		{"a result that records no time", untimed, 7, stored, true},
		{"a result that records no time, another sequence", untimed, 8, stored, false},
		{"no mark at all", nats.Header{}, 7, stored, false},
		{"a time with its trailing zeros", zeros, 7, time.Date(2026, 12, 1, 9, 0, 0, 100000000, time.UTC), true},
		{"a time that is none", garbled, 7, stored, false},
	} {
		if got := wire.Answers(tt.h, tt.seq, tt.stored); got != tt.want {
			t.Errorf("%s: Answers = %v, want %v", tt.name, got, tt.want)
		}
	}
}
