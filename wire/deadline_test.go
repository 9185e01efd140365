package wire_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/wire"
)

// deadlineJSON is a JSON request with the deadline.
func deadlineJSON(t testing.TB, deadline string) []byte {
	t.Helper()
	text, err := json.Marshal(deadline)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"id":"d","messages":[{"role":"user"}],"deadline":` + string(text) + `}`)
}

// deadlineBodies are a request with the deadline in each encoding: JSON,
// and msgpack with the deadline as a string.
func deadlineBodies(t testing.TB, deadline string) map[string][]byte {
	t.Helper()
	return map[string][]byte{
		"json":    deadlineJSON(t, deadline),
		"msgpack": compactMsgpack(t, map[string]any{"id": "d", "messages": []any{map[string]any{"role": "user"}}, "deadline": deadline}),
	}
}

// TestDecodeRequestDeadlineReadAsTimeParseReads: a deadline is read as
// time.Parse reads time.RFC3339Nano, in both encodings, kept as sent, and
// the text it refuses is a bad request naming the deadline.
func TestDecodeRequestDeadlineReadAsTimeParseReads(t *testing.T) {
	utc := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	accepted := []struct {
		deadline string
		at       time.Time
	}{
		{"2030-01-02T03:04:05Z", utc("2030-01-02T03:04:05Z")},
		{"2030-01-02T03:04:05.5+01:00", utc("2030-01-02T02:04:05.5Z")},
		{"2030-01-02T03:04:05+23:59", utc("2030-01-01T03:05:05Z")},
		{"2030-01-02T03:04:05-00:00", utc("2030-01-02T03:04:05Z")},
		{"2028-02-29T00:00:00Z", utc("2028-02-29T00:00:00Z")},
		// Digits past the ninth are below a nanosecond.
		{"2030-01-02T03:04:05.1234567891Z", utc("2030-01-02T03:04:05.123456789Z")},
		{"0000-01-01T00:00:00Z", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		// What time.Parse takes beyond RFC 3339's grammar, as
		// docs/requests.md says: a comma before the fraction, a one-digit
		// hour, an offset of 24 hours or with minute 60.
		{"2030-01-02T03:04:05,5Z", utc("2030-01-02T03:04:05.5Z")},
		{"2030-01-02T3:04:05Z", utc("2030-01-02T03:04:05Z")},
		{"2030-01-02T03:04:05+24:00", utc("2030-01-01T03:04:05Z")},
		{"2030-01-02T03:04:05+23:60", utc("2030-01-01T03:04:05Z")},
	}
	for _, tt := range accepted {
		for enc, body := range deadlineBodies(t, tt.deadline) {
			t.Run(enc+" "+tt.deadline, func(t *testing.T) {
				d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
				if err != nil {
					t.Fatal(err)
				}
				if !d.DeadlineAt.Equal(tt.at) {
					t.Fatalf("DeadlineAt = %v, want %v", d.DeadlineAt, tt.at)
				}
				if d.Deadline != tt.deadline {
					t.Fatalf("Deadline = %q, want it as sent", d.Deadline)
				}
			})
		}
	}
	refused := []string{
		// "T" and "Z" upper case only.
		"2030-01-02t03:04:05z",
		"2030-01-02T03:04:05z",
		// No leap second.
		"2016-12-31T23:59:60Z",
		"2030-01-02T03:04:60Z",
		// A fraction has a digit.
		"2030-01-02T03:04:05.Z",
		// Hours 00-23, days within the month.
		"2030-01-02T24:00:00Z",
		"2030-04-31T03:04:05Z",
		"2030-02-29T03:04:05Z",
		// "T", not a space; a zone is required, its offset with a colon;
		// four digits of year, no sign.
		"2030-01-02 03:04:05Z",
		"2030-01-02T03:04:05",
		"2030-01-02T03:04:05+0100",
		"10000-01-02T03:04:05Z",
		"+2030-01-02T03:04:05Z",
		"tomorrow",
	}
	for _, deadline := range refused {
		for enc, body := range deadlineBodies(t, deadline) {
			t.Run(enc+" "+deadline, func(t *testing.T) {
				d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
				if !errors.Is(err, wire.ErrBadRequest) {
					t.Fatalf("err = %v, DeadlineAt = %v; want ErrBadRequest", err, d.DeadlineAt)
				}
				if want := "deadline \"" + deadline + "\" is not an RFC 3339 time"; !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want %q", err, want)
				}
			})
		}
	}
}

// timestamp96 is a msgpack timestamp in its 12-byte form.
func timestamp96(sec int64, nsec uint32) msgpack.RawMessage {
	b := []byte{0xc7, 12, 0xff}
	b = binary.BigEndian.AppendUint32(b, nsec)
	return binary.BigEndian.AppendUint64(b, uint64(sec))
}

// timestamp64 is a msgpack timestamp in its 8-byte form: 30 bits of
// nanoseconds, 34 of seconds.
func timestamp64(sec int64, nsec uint32) msgpack.RawMessage {
	return binary.BigEndian.AppendUint64([]byte{0xd7, 0xff}, uint64(nsec)<<34|uint64(sec))
}

// TestDecodeRequestMsgpackTimestampDeadlineOutsideRFC3339: a msgpack
// timestamp RFC 3339 cannot write (a year outside 0000 to 9999), or one the
// msgpack spec forbids (nanoseconds over 999999999), is a bad request that
// names the field and the timestamp as sent, never a time other than sent;
// the first and last instants RFC 3339 writes are deadlines.
func TestDecodeRequestMsgpackTimestampDeadlineOutsideRFC3339(t *testing.T) {
	body := func(ts msgpack.RawMessage) []byte {
		return compactMsgpack(t, map[string]any{"id": "ts", "messages": []any{map[string]any{"role": "user"}}, "deadline": ts})
	}
	refused := []struct {
		name string
		ts   msgpack.RawMessage
		want string
	}{
		{"-2^63 seconds", timestamp96(math.MinInt64, 0),
			"deadline, the msgpack timestamp of -9223372036854775808 seconds since 1970, is not an RFC 3339 time: its year is outside 0000 to 9999"},
		{"2^63-1 seconds", timestamp96(math.MaxInt64, 999_999_999),
			"deadline, the msgpack timestamp of 9223372036854775807 seconds since 1970, is not an RFC 3339 time"},
		{"year -1", timestamp96(-62167219201, 0), "msgpack timestamp of -62167219201 seconds since 1970, is not an RFC 3339 time"},
		{"year 10000", timestamp96(253402300800, 0), "msgpack timestamp of 253402300800 seconds since 1970, is not an RFC 3339 time"},
		{"timestamp 96 nanoseconds over", timestamp96(1_900_000_000, 1_000_000_000),
			"deadline is not a valid msgpack timestamp: its nanoseconds, 1000000000, are over 999999999"},
		{"timestamp 64 nanoseconds over", timestamp64(1_900_000_000, 1<<30-1),
			"deadline is not a valid msgpack timestamp: its nanoseconds, 1073741823, are over 999999999"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			d, err := wire.DecodeRequest(body(tt.ts), nats.Header{}, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, Deadline = %q; want ErrBadRequest with %q", err, d.Deadline, tt.want)
			}
		})
	}
	accepted := []struct {
		name     string
		ts       msgpack.RawMessage
		deadline string
	}{
		{"first RFC 3339 instant", timestamp96(-62167219200, 0), "0000-01-01T00:00:00Z"},
		{"last RFC 3339 instant", timestamp96(253402300799, 999_999_999), "9999-12-31T23:59:59.999999999Z"},
		{"zero time", timestamp96(-62135596800, 0), "0001-01-01T00:00:00Z"},
		{"timestamp 64 last nanosecond", timestamp64(1_900_000_000, 999_999_999), "2030-03-17T17:46:40.999999999Z"},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			d, err := wire.DecodeRequest(body(tt.ts), nats.Header{}, 1, prefixes)
			if err != nil {
				t.Fatal(err)
			}
			want, err := time.Parse(time.RFC3339Nano, tt.deadline)
			if err != nil {
				t.Fatal(err)
			}
			if d.Deadline != tt.deadline || !d.DeadlineAt.Equal(want) {
				t.Fatalf("Deadline = %q, DeadlineAt = %v; want %q", d.Deadline, d.DeadlineAt, tt.deadline)
			}
		})
	}
}

// FuzzDecodeRequestDeadline: a deadline is accepted exactly when
// time.Parse takes it as time.RFC3339Nano, and then read as the same
// instant; no text makes the decoder fail otherwise.
func FuzzDecodeRequestDeadline(f *testing.F) {
	for _, s := range []string{
		"2030-01-02T03:04:05Z", "2030-01-02t03:04:05.5z", "2030-01-02T03:04:05+24:00", "2030-01-02T03:04:05-23:60",
		"2016-12-31T23:59:60Z", "1990-12-31T15:59:60-08:00", "2030-01-02T03:04:60Z", "2030-01-02T03:04:05,5Z",
		"2030-01-02T3:04:05Z", "2030-04-31T03:04:05Z", "2030-01-02T03:04:05.Z", "9999-12-31T23:59:60Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || !utf8.ValidString(s) {
			// Empty is no deadline; JSON would carry other text.
			return
		}
		d, err := wire.DecodeRequest(deadlineJSON(t, s), nats.Header{}, 1, prefixes)
		want, perr := time.Parse(time.RFC3339Nano, s)
		switch {
		case perr != nil && err == nil:
			t.Fatalf("accepted %q as %v; time.Parse: %v", s, d.DeadlineAt, perr)
		case perr == nil && err != nil && errors.Is(err, wire.ErrBadRequest) && strings.Contains(err.Error(), "is not an RFC 3339 time"):
			t.Fatalf("refused %q (%v); time.Parse reads %v", s, err, want)
		case err == nil && !d.DeadlineAt.Equal(want):
			t.Fatalf("%q read as %v, want %v", s, d.DeadlineAt, want)
		}
	})
}
