package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// ParseDeadline reads s, a request's deadline, as time.Parse reads
// time.RFC3339Nano (docs/requests.md, deadline).
func ParseDeadline(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// The instants RFC 3339 can write in UTC: date-fullyear is four digits.
var (
	minDeadlineUnix = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxDeadlineUnix = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// MsgpackDeadline is the RFC 3339 text, in UTC, of a deadline sent as the
// msgpack timestamp v (extension type -1, any of its three sizes). It reads
// the timestamp itself: vmihailenco/msgpack takes nanoseconds over
// 999999999, which the spec forbids, and time.Time wraps the year of an
// instant near -2^63 seconds. A year outside 0000 to 9999 is refused.
func MsgpackDeadline(v []byte) (string, error) {
	var sec int64
	var nsec uint32
	switch {
	case len(v) == 6 && v[0] == 0xd6: // timestamp 32: unsigned seconds
		sec = int64(binary.BigEndian.Uint32(v[2:]))
	case len(v) == 10 && v[0] == 0xd7: // timestamp 64: 30 bits of nanoseconds, 34 of seconds
		x := binary.BigEndian.Uint64(v[2:])
		nsec, sec = uint32(x>>34), int64(x&(1<<34-1))
	case len(v) == 15 && v[0] == 0xc7: // timestamp 96: nanoseconds, signed seconds
		nsec = binary.BigEndian.Uint32(v[3:])
		sec = int64(binary.BigEndian.Uint64(v[7:]))
	default:
		return "", fmt.Errorf("%w: deadline is not a msgpack timestamp of 4, 8 or 12 bytes", ErrBadRequest)
	}
	if nsec > 999_999_999 {
		return "", fmt.Errorf("%w: deadline is not a valid msgpack timestamp: its nanoseconds, %d, are over 999999999", ErrBadRequest, nsec)
	}
	if sec < minDeadlineUnix || sec > maxDeadlineUnix {
		return "", fmt.Errorf("%w: deadline, the msgpack timestamp of %d seconds since 1970, is not an RFC 3339 time: its year is outside 0000 to 9999",
			ErrBadRequest, sec)
	}
	return time.Unix(sec, int64(nsec)).UTC().Format(time.RFC3339Nano), nil
}
