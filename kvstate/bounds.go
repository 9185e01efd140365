package kvstate

import (
	"encoding/json"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// Anyone who can write to the bucket can write any value, and every
// processor, `processor status`, `processor watch` and the status page read
// it. A value a processor would never write is therefore bounded where it is
// decoded, so that one bad key costs only its own provider's state: it can
// never make a time that JSON cannot write (a year past 9999 breaks every
// row of status -json and /status.json), keep a provider open for longer
// than any processor would, or overflow a count.
const (
	// DefaultCeiling is the longest cooldown believed of a provider whose
	// settings the reader does not know (Options.Ceiling), and the longest
	// probe lease of any: far beyond any sensible max_cooldown,
	// auth_cooldown or timeout, yet short enough that a hand-written key
	// cannot take a provider out for good.
	DefaultCeiling = 365 * 24 * time.Hour
	// clockSkew is how far a processor's clock may run ahead of the NATS
	// server's and its values still be believed as written: a time in a
	// value is at most the server's time of the write plus this.
	clockSkew = time.Minute
	// maxCount bounds failure and trip counts: far above any real outage,
	// far below where an increment overflows and a provider never trips
	// again.
	maxCount = 1_000_000_000
	// maxBy bounds the processor id or operator in a value; real ids are
	// <hostname>-<pid>-<random>, operators user@host.
	maxBy = 300
)

// lastWritable is the latest time RFC 3339 and time.Time's JSON can write.
var lastWritable = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// bounds is what one value read from the bucket is held to.
type bounds struct {
	// written is when the server stored the value (the entry's Created):
	// no time in it can be much later.
	written time.Time
	// ceiling is the longest cooldown the value may describe.
	ceiling time.Duration
}

// boundsFor returns the bounds of a value of provider written at written,
// with ceiling (nil: DefaultCeiling for every provider).
func boundsFor(provider string, written time.Time, ceiling func(string) time.Duration) bounds {
	b := bounds{written: written.UTC(), ceiling: DefaultCeiling}
	if ceiling != nil {
		if c := ceiling(provider); c > 0 {
			b.ceiling = min(c, DefaultCeiling)
		}
	}
	b.ceiling = max(b.ceiling.Truncate(time.Second), time.Second)
	if b.written.IsZero() || b.written.After(lastWritable.Add(-DefaultCeiling-clockSkew)) {
		// An entry without a creation time (or one no server clock could
		// give) still leaves room for every sum below to stay writable.
		b.written = lastWritable.Add(-DefaultCeiling - clockSkew)
	}
	return b
}

// latest returns t, or the time of the write when t lies more than
// clockSkew after it; it appends field to notes when it changes t.
func (b bounds) latest(t *time.Time, field string, notes *[]string) {
	if t.After(b.written.Add(clockSkew)) {
		*t = b.written
		*notes = append(*notes, field)
	}
}

// count holds n to [0, maxCount].
func (b bounds) count(n *int, field string, notes *[]string) {
	if *n < 0 || *n > maxCount {
		*n = min(max(*n, 0), maxCount)
		*notes = append(*notes, field)
	}
}

// seconds holds a length in seconds to [0, ceiling].
func (b bounds) seconds(s *int64, field string, notes *[]string) {
	limit := int64(b.ceiling / time.Second)
	if *s < 0 || *s > limit {
		*s = min(max(*s, 0), limit)
		*notes = append(*notes, field)
	}
}

// text holds s to limit bytes plus the "…" that text.Cut adds, as a
// processor writes it.
func (b bounds) text(s *string, limit int, field string, notes *[]string) {
	if len(*s) > limit+len("…") {
		*s = text.Cut(*s, limit)
		*notes = append(*notes, field)
	}
}

// bound holds h to what a processor writes and names the fields it
// changed. A trip dated after the write is dated at the write: the
// provider stays open for that trip's length, no longer.
func (h *Health) bound(b bounds) []string {
	var notes []string
	b.count(&h.ConsecutiveFailures, "consecutive_failures", &notes)
	b.count(&h.Trips, "trips", &notes)
	b.seconds(&h.LastTripS, "last_trip_s", &notes)
	b.latest(&h.LastFailure, "last_failure", &notes)
	b.latest(&h.LastSuccess, "last_success", &notes)
	b.latest(&h.LastTrip, "last_trip", &notes)
	b.latest(&h.ResetAt, "reset_at", &notes)
	b.text(&h.LastError, maxReason, "last_error", &notes)
	b.text(&h.ResetBy, maxBy, "reset_by", &notes)
	return notes
}

// bound holds c to what a processor writes and names the fields it
// changed. A processor writes until as the time of the trip plus
// duration_s, so a cooldown never ends later than that after the write: a
// key without duration_s ends when it was written.
func (c *Cooldown) bound(b bounds) []string {
	var notes []string
	b.count(&c.Trip, "trip", &notes)
	b.seconds(&c.DurationS, "duration_s", &notes)
	end := b.written.Add(time.Duration(c.DurationS) * time.Second)
	if c.Until.After(end.Add(clockSkew)) {
		c.Until = end
		notes = append(notes, "until")
	}
	b.text(&c.Reason, maxReason, "reason", &notes)
	b.text(&c.By, maxBy, "by", &notes)
	return notes
}

// bound holds p to a lease no longer than DefaultCeiling from its write
// and names the fields it changed. A provider's ceiling is its longest
// cooldown, which can be shorter than its lease (timeout + 1s).
func (p *Probe) bound(b bounds) []string {
	var notes []string
	end := b.written.Add(DefaultCeiling)
	if p.Until.After(end.Add(clockSkew)) {
		p.Until = end
		notes = append(notes, "until")
	}
	b.text(&p.By, maxBy, "by", &notes)
	return notes
}

// boundedValue is a value of the bucket that bound holds to what a
// processor writes.
type boundedValue[T any] interface {
	*T
	bound(bounds) []string
}

// decode reads a value of the bucket and bounds it; notes names the
// fields that were out of range.
func decode[T any, P boundedValue[T]](data []byte, b bounds) (value T, notes []string, err error) {
	if err := json.Unmarshal(data, &value); err != nil {
		return value, nil, err
	}
	return value, P(&value).bound(b), nil
}
