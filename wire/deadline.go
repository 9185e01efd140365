package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// ParseDeadline reads s, a request's deadline, as an RFC 3339 date-time
// (section 5.6), as the standard reads it; ok is false when it is not one.
// time.Parse(time.RFC3339, s) reads some text otherwise: it takes an offset
// of +24:00 or with minute 60, a one-digit hour and a comma before the
// fraction, all of which the grammar refuses, and it refuses a leap second
// and a lowercase 't' or 'z', which the grammar allows.
func ParseDeadline(s string) (time.Time, bool) {
	// full-date "T" hour:minute:second, every digit ASCII; the fraction and
	// the offset follow.
	const shape = "0000-00-00T00:00:00"
	if len(s) < len(shape) {
		return time.Time{}, false
	}
	for i := range len(shape) {
		switch c := s[i]; shape[i] {
		case '0':
			if !isASCIIDigit(c) {
				return time.Time{}, false
			}
		case 'T':
			// "T" and "Z" may be lowercase (section 5.6, NOTE).
			if c != 'T' && c != 't' {
				return time.Time{}, false
			}
		default:
			if c != shape[i] {
				return time.Time{}, false
			}
		}
	}
	year, month, day := digitsValue(s[0:4]), time.Month(digitsValue(s[5:7])), digitsValue(s[8:10])
	hour, minute, sec := digitsValue(s[11:13]), digitsValue(s[14:16]), digitsValue(s[17:19])
	rest := s[len(shape):]
	nsec := 0
	if rest != "" && rest[0] == '.' {
		n := 1
		for n < len(rest) && isASCIIDigit(rest[n]) {
			n++
		}
		if n == 1 {
			// time-secfrac = "." 1*DIGIT
			return time.Time{}, false
		}
		// Digits past the ninth are below a nanosecond, as time.Parse
		// reads them.
		nsec = digitsValue((rest[1:n] + "00000000")[:9])
		rest = rest[n:]
	}
	zone := time.UTC
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == len("+07:00") && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		isASCIIDigit(rest[1]) && isASCIIDigit(rest[2]) && isASCIIDigit(rest[4]) && isASCIIDigit(rest[5]):
		// time-numoffset takes time-hour and time-minute: 00-23, 00-59.
		h, m := digitsValue(rest[1:3]), digitsValue(rest[4:6])
		if h > 23 || m > 59 {
			return time.Time{}, false
		}
		if offset := (h*60 + m) * 60; offset != 0 {
			if rest[0] == '-' {
				offset = -offset
			}
			zone = time.FixedZone("", offset)
		}
	default:
		return time.Time{}, false
	}
	daysInMonth := time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
	if month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || sec > 60 {
		return time.Time{}, false
	}
	if sec < 60 {
		return time.Date(year, month, day, hour, minute, sec, nsec, zone), true
	}
	// A leap second (section 5.7) is the last second of a UTC month,
	// 23:59:60 UTC, at another minute in a zone other than Z. It is read as
	// the instant one second after :59, the next minute's :00: time.Time
	// has no instant of its own for it.
	before := time.Date(year, month, day, hour, minute, 59, nsec, zone).UTC()
	if before.Hour() != 23 || before.Minute() != 59 || before.AddDate(0, 0, 1).Day() != 1 || before.Year() == 9999 && before.Month() == 12 {
		// Not the last second of a UTC month, or one whose next minute is
		// in year 10000, which RFC 3339 cannot write.
		return time.Time{}, false
	}
	return before.Add(time.Second), true
}

func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitsValue is the value of s, ASCII digits only.
func digitsValue(s string) int {
	n := 0
	for i := range len(s) {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// The instants RFC 3339 can write in UTC: date-fullyear is four digits.
var (
	minDeadlineUnix = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxDeadlineUnix = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// MsgpackDeadline is the RFC 3339 text, in UTC, of a request's deadline
// sent as the msgpack timestamp v
// (extension type -1, any of its three sizes, as msgpackwalk.IsTimestamp
// tells). It reads the timestamp itself: vmihailenco/msgpack takes
// nanoseconds over 999999999, which the msgpack spec forbids, and carries
// them into the seconds, and time.Time wraps the year of an instant near
// -2^63 seconds into a positive one. A timestamp RFC 3339 cannot write,
// before year 0000 or after 9999, is refused naming its seconds.
func MsgpackDeadline(v []byte) (string, error) {
	var sec int64
	var nsec uint32
	if len(v) == 0 {
		return "", fmt.Errorf("%w: deadline is not a msgpack timestamp of 4, 8 or 12 bytes", ErrBadRequest)
	}
	switch {
	case v[0] == 0xd6 && len(v) == 6: // timestamp 32: unsigned seconds
		sec = int64(binary.BigEndian.Uint32(v[2:]))
	case v[0] == 0xd7 && len(v) == 10: // timestamp 64: 30 bits of nanoseconds, 34 of seconds
		x := binary.BigEndian.Uint64(v[2:])
		nsec, sec = uint32(x>>34), int64(x&(1<<34-1))
	case v[0] == 0xc7 && len(v) == 15: // timestamp 96: nanoseconds, signed seconds
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
