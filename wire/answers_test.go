package wire_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/wire"
)

// TestAResultAnswersTheMessageItNames: a result answers the request message
// of its sequence and stored time, not another of the same sequence (a
// requests stream created again); a client that knows only the sequence
// goes by the sequence, and a result that records no time answers a
// message of its sequence stored before it.
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
	after, before := stored.Add(time.Second), stored.Add(-time.Second) // when results were stored
	for _, tt := range []struct {
		name         string
		h            nats.Header
		resultStored time.Time
		seq          uint64
		stored       time.Time
		want         bool
	}{
		{"its own message", h, after, 7, stored, true},
		{"its own message, in another zone", h, after, 7, stored.UTC(), true},
		{"another sequence", h, after, 8, stored, false},
		{"the same sequence stored at another time", h, after, 7, stored.Add(time.Nanosecond), false},
		{"the sequence alone", h, after, 7, time.Time{}, true},
		{"the sequence alone, a result that records no time", untimed, before, 7, time.Time{}, true},
		{"a result that records no time, stored after", untimed, after, 7, stored, true},
		{"a result that records no time, stored before", untimed, before, 7, stored, false},
		{"a result that records no time, stored when unknown", untimed, time.Time{}, 7, stored, true},
		{"a result that records no time, another sequence", untimed, after, 8, stored, false},
		{"no mark at all", nats.Header{}, after, 7, stored, false},
		{"a time with its trailing zeros", zeros, after, 7, time.Date(2026, 12, 1, 9, 0, 0, 100000000, time.UTC), true},
		{"a time that is none", garbled, after, 7, stored, false},
	} {
		if got := wire.Answers(tt.h, tt.resultStored, tt.seq, tt.stored); got != tt.want {
			t.Errorf("%s: Answers = %v, want %v", tt.name, got, tt.want)
		}
	}
}
