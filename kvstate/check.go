package kvstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The bucket is the fleet's own, but a key edited by hand into something no
// writer makes must not break every reader (a time past year 9999 cannot be
// written as JSON, and status -json writes every row): a value is checked
// once, where it is decoded, against the rules every writer keeps.

// maxCount bounds failure and trip counts, far below an overflow.
const maxCount = 1_000_000_000

// checked is a value of the bucket that knows the rules its writers keep.
type checked[T any] interface {
	*T
	check() error
}

// decode reads a value of the bucket and checks it.
func decode[T any, P checked[T]](data []byte) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return v, err
	}
	return v, P(&v).check()
}

// check reports the rules h breaks.
func (h *Health) check() error {
	return errors.Join(count("consecutive_failures", h.ConsecutiveFailures), count("trips", h.Trips),
		length("last_trip_s", h.LastTripS),
		writable("last_failure", h.LastFailure), writable("last_success", h.LastSuccess),
		writable("reset_at", h.ResetAt), writable("last_trip", h.LastTrip),
		writable("last_trip + last_trip_s", h.LastTrip.Add(time.Duration(h.LastTripS)*time.Second)))
}

// check reports the rules c breaks.
func (c *Cooldown) check() error {
	return errors.Join(count("trip", c.Trip), length("duration_s", c.DurationS), writable("until", c.Until))
}

// check reports whether p's until can be written.
func (p *Probe) check() error { return writable("until", p.Until) }

func count(field string, n int) error {
	if n < 0 || n > maxCount {
		return fmt.Errorf("%s %d is outside 0 to %d", field, n, maxCount)
	}
	return nil
}

// length checks a length in whole seconds: from 0 to a century.
func length(field string, s int64) error {
	if s < 0 || s > 100*365*24*3600 {
		return fmt.Errorf("%s %d is outside 0 to a hundred years", field, s)
	}
	return nil
}

// writable checks that JSON can write t: in the years 0000 to 9999 UTC.
func writable(field string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s %s is outside the years 0000 to 9999", field, t.Format(time.RFC3339))
	}
	return nil
}

// clockSkew is how far a processor's clock may run ahead of another's: a
// probe lease is lapsed only this long past its until.
const clockSkew = time.Minute

// maxBy bounds the processor id or operator written in a value.
const maxBy = 300
