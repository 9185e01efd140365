package msgpackwalk

import (
	"encoding/binary"
	"errors"
)

// ErrNotMap reports a value that is not a msgpack map where one was wanted.
var ErrNotMap = errors.New("msgpack: not a map")

// ErrNotArray reports a value that is not a msgpack array where one was wanted.
var ErrNotArray = errors.New("msgpack: not an array")

// Entry is one key/value pair of a msgpack map, as offsets into its data:
// the key is data[KeyStart:ValStart] and the value data[ValStart:ValEnd].
type Entry struct {
	KeyStart, ValStart, ValEnd int
	// Key is the key when KeyIsString (a str or bin, as the decoder reads).
	Key         string
	KeyIsString bool
}

// MapEntries splits the map that starts data into its entries, in order,
// duplicates included, ignoring bytes after it. It refuses a value that is not
// a map (ErrNotMap) or is cut short, never allocating by a declared length.
func MapEntries(data []byte) ([]Entry, error) {
	spans, err := values(data, 0x80, 0xde, 0xdf, 2, ErrNotMap)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(spans)/2)
	for i := 0; i < len(spans); i += 2 {
		key, val := spans[i], spans[i+1]
		e := Entry{KeyStart: key[0], ValStart: val[0], ValEnd: val[1]}
		e.Key, e.KeyIsString = String(data[key[0]:key[1]])
		entries = append(entries, e)
	}
	return entries, nil
}

// Elements returns the start and end offsets of each element of the array
// that starts data, refusing as MapEntries does (ErrNotArray).
func Elements(data []byte) ([][2]int, error) {
	return values(data, 0x90, 0xdc, 0xdd, 1, ErrNotArray)
}

// values returns the start and end offsets of each value in the map or
// array with the codes fix (16 values), c16 and c32 that starts data: per
// values an item, an item of a map being its key and its value. It refuses
// another value with wrongKind, and a length whose items, of per values of
// a byte at least, the bytes after the header could not hold.
func values(data []byte, fix, c16, c32 byte, per uint64, wrongKind error) ([][2]int, error) {
	var n uint64
	var pos int
	switch {
	case len(data) == 0:
		return nil, ErrTruncated
	case data[0] >= fix && data[0] <= fix|0x0f:
		n, pos = uint64(data[0]&0x0f), 1
	case data[0] == c16 && len(data) >= 3:
		n, pos = uint64(binary.BigEndian.Uint16(data[1:])), 3
	case data[0] == c32 && len(data) >= 5:
		n, pos = uint64(binary.BigEndian.Uint32(data[1:])), 5
	case data[0] == c16, data[0] == c32:
		return nil, ErrTruncated
	default:
		return nil, wrongKind
	}
	if n > uint64(len(data)-pos)/per {
		return nil, ErrTruncated
	}
	spans := make([][2]int, 0, n*per)
	for range n * per {
		end, err := ValueEnd(data, pos)
		if err != nil {
			return nil, err
		}
		spans = append(spans, [2]int{pos, end})
		pos = end
	}
	return spans, nil
}

// String decodes b when it is exactly one msgpack str or bin (which the
// decoder also reads as a string).
func String(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	hdr, _ := strHeader(b[0])
	if hdr == 0 || len(b) < hdr {
		return "", false
	}
	end, err := ValueEnd(b, 0)
	if err != nil || end != len(b) {
		return "", false
	}
	return string(b[hdr:]), true
}

// IsNil reports whether b starts with msgpack's nil.
func IsNil(b []byte) bool { return len(b) > 0 && b[0] == 0xc0 }

// IsTimestamp reports whether b starts with a msgpack timestamp (extension
// type -1 of 4, 8 or 12 bytes).
func IsTimestamp(b []byte) bool {
	if len(b) < 3 {
		return false
	}
	switch b[0] {
	case 0xd6, 0xd7: // fixext 4, fixext 8
		return int8(b[1]) == -1
	case 0xc7: // ext 8, as the 12-byte form is sent
		return b[1] == 12 && int8(b[2]) == -1
	}
	return false
}

// Kind names the kind of the msgpack value that starts b for a user's
// error: "a string", "an integer", "a list", ...
func Kind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch c := b[0]; {
	case c <= 0x7f, c >= 0xe0, c >= 0xcc && c <= 0xd3:
		return "an integer"
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		return "a map"
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		return "a list"
	case c >= 0xa0 && c <= 0xbf, c >= 0xd9 && c <= 0xdb:
		return "a string"
	case c == 0xc0:
		return "null"
	case c == 0xc2, c == 0xc3:
		return "a boolean"
	case c >= 0xc4 && c <= 0xc6:
		return "binary data"
	case c == 0xca, c == 0xcb:
		return "a number"
	case IsTimestamp(b):
		return "a timestamp"
	case c >= 0xc7 && c <= 0xc9, c >= 0xd4 && c <= 0xd8:
		return "a msgpack extension"
	}
	return "an invalid msgpack value"
}
