package msgpackwalk

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrTruncated reports msgpack that ends inside a value.
var ErrTruncated = errors.New("msgpack: unexpected end of data")

// Check walks the first msgpack value of data and refuses one that is
// truncated, nests deeper than maxDepth, declares more elements than the bytes
// that follow could hold, or holds a str that is not UTF-8 (the spec's str is
// text; bytes go in a bin). After it, a decoder's allocations stay proportional
// to data's size. It neither recurses nor allocates by a declared length.
func Check(data []byte, maxDepth int) error {
	pending := []uint64{1} // values still to read at each open level
	pos := 0
	for len(pending) > 0 {
		top := len(pending) - 1
		if pending[top] == 0 {
			pending = pending[:top]
			continue
		}
		pending[top]--
		next, children, err := Head(data, pos)
		if err != nil {
			return err
		}
		if hdr, isStr := strHeader(data[pos]); isStr && !utf8.Valid(data[pos+hdr:next]) {
			return fmt.Errorf("msgpack: the string at offset %d is not valid UTF-8", pos)
		}
		pos = next
		if children == 0 {
			continue
		}
		// Every value takes at least one byte.
		if children > uint64(len(data)-pos) {
			return fmt.Errorf("msgpack: container at offset %d declares %d values but only %d bytes follow", pos, children, len(data)-pos)
		}
		if len(pending) > maxDepth {
			return fmt.Errorf("msgpack: nesting deeper than %d", maxDepth)
		}
		pending = append(pending, children)
	}
	return nil
}

// ValueEnd returns the offset just past the msgpack value that starts at pos.
// It counts the values still to skip instead of recursing, and refuses a count
// the remaining bytes could not hold: its cost is bounded by len(data).
func ValueEnd(data []byte, pos int) (int, error) {
	pending := uint64(1)
	for pending > 0 {
		if pending > uint64(len(data)-pos) { // every value takes a byte at least
			return 0, ErrTruncated
		}
		pending--
		next, children, err := Head(data, pos)
		if err != nil {
			return 0, err
		}
		pos = next
		pending += children
	}
	return pos, nil
}

// Head reads the value at pos: for a scalar the offset past it; for an
// array or map, the offset past its header and the number of values in it
// (twice the entries of a map).
func Head(data []byte, pos int) (next int, children uint64, err error) {
	if pos >= len(data) {
		return 0, 0, ErrTruncated
	}
	c := data[pos]
	pos++
	var size uint64 // bytes of payload after the header
	ok := true
	lenOf := func(width int) uint64 {
		var v uint64
		v, pos, ok = readUint(data, pos, width)
		return v
	}
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c >= 0x80 && c <= 0x8f:
		children = 2 * uint64(c&0x0f)
	case c >= 0x90 && c <= 0x9f:
		children = uint64(c & 0x0f)
	case c >= 0xa0 && c <= 0xbf:
		size = uint64(c & 0x1f)
	case c == 0xc4, c == 0xd9: // bin8, str8
		size = lenOf(1)
	case c == 0xc5, c == 0xda: // bin16, str16
		size = lenOf(2)
	case c == 0xc6, c == 0xdb: // bin32, str32
		size = lenOf(4)
	case c == 0xc7: // ext8, ext16, ext32: length, then a type byte and the data
		size = lenOf(1) + 1
	case c == 0xc8:
		size = lenOf(2) + 1
	case c == 0xc9:
		size = lenOf(4) + 1
	case c == 0xca, c == 0xce, c == 0xd2: // float32, uint32, int32
		size = 4
	case c == 0xcb, c == 0xcf, c == 0xd3: // float64, uint64, int64
		size = 8
	case c == 0xcc, c == 0xd0:
		size = 1
	case c == 0xcd, c == 0xd1:
		size = 2
	case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16 plus the type byte
		size = 1 + 1<<(c-0xd4)
	case c == 0xdc:
		children = lenOf(2)
	case c == 0xdd:
		children = lenOf(4)
	case c == 0xde:
		children = 2 * lenOf(2)
	case c == 0xdf:
		children = 2 * lenOf(4)
	default: // 0xc1 is never used
		return 0, 0, fmt.Errorf("msgpack: invalid code %#x", c)
	}
	if !ok || size > uint64(len(data)-pos) {
		return 0, 0, ErrTruncated
	}
	return pos + int(size), children, nil
}

// strHeader is the header size of the str (isStr) or bin whose first byte
// is c; 0 for any other value.
func strHeader(c byte) (size int, isStr bool) {
	switch {
	case c >= 0xa0 && c <= 0xbf: // fixstr
		return 1, true
	case c == 0xd9, c == 0xda, c == 0xdb: // str8, str16, str32
		return 1 + 1<<(c-0xd9), true
	case c == 0xc4, c == 0xc5, c == 0xc6: // bin8, bin16, bin32
		return 1 + 1<<(c-0xc4), false
	}
	return 0, false
}

// readUint reads a big-endian length of width bytes at pos.
func readUint(data []byte, pos, width int) (v uint64, next int, ok bool) {
	if len(data)-pos < width {
		return 0, pos, false
	}
	for _, b := range data[pos : pos+width] {
		v = v<<8 | uint64(b)
	}
	return v, pos + width, true
}
