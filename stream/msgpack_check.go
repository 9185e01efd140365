package stream

import (
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// maxMsgpackDepth bounds the nesting of a msgpack body, as encoding/json
// bounds JSON's, so that a body of nested arrays cannot exhaust the stack.
const maxMsgpackDepth = 10000

// unmarshalMsgpack decodes data after checkMsgpack has vouched for it.
func unmarshalMsgpack(data []byte, v any) error {
	if err := checkMsgpack(data); err != nil {
		return err
	}
	return msgpack.Unmarshal(data, v)
}

// checkMsgpack walks the first msgpack value of data without decoding it and
// refuses one that is truncated, nests deeper than maxMsgpackDepth, or
// declares more elements than the bytes that follow could hold. The msgpack
// decoder sizes a slice from its declared length before reading any element,
// so without this check a 5-byte array header (0xdd ff ff ff ff) makes it
// allocate 2^32 elements and the process dies of an out-of-memory fatal
// error, which no recover catches. After the check, the elements of every
// container are present in data, so allocations stay proportional to its size.
func checkMsgpack(data []byte) error {
	errTruncated := errors.New("msgpack: unexpected end of data")
	pending := []uint64{1} // values still to read at each open nesting level
	pos := 0
	readLen := func(size int) (uint64, error) {
		if len(data)-pos < size {
			return 0, errTruncated
		}
		var n uint64
		for _, b := range data[pos : pos+size] {
			n = n<<8 | uint64(b)
		}
		pos += size
		return n, nil
	}
	for len(pending) > 0 {
		top := len(pending) - 1
		if pending[top] == 0 {
			pending = pending[:top]
			continue
		}
		pending[top]--
		if pos >= len(data) {
			return errTruncated
		}
		c := data[pos]
		pos++
		var skip, items uint64 // payload bytes to skip; child values to read
		var err error
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixint, nil, bool
		case c <= 0x8f: // fixmap
			items = 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			items = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		case c == 0xc4, c == 0xd9: // bin8, str8
			skip, err = readLen(1)
		case c == 0xc5, c == 0xda: // bin16, str16
			skip, err = readLen(2)
		case c == 0xc6, c == 0xdb: // bin32, str32
			skip, err = readLen(4)
		case c == 0xc7: // ext8: length, then type
			skip, err = readLen(1)
			skip++
		case c == 0xc8:
			skip, err = readLen(2)
			skip++
		case c == 0xc9:
			skip, err = readLen(4)
			skip++
		case c == 0xca: // float32
			skip = 4
		case c == 0xcb: // float64
			skip = 8
		case c == 0xcc, c == 0xd0: // uint8, int8
			skip = 1
		case c == 0xcd, c == 0xd1:
			skip = 2
		case c == 0xce, c == 0xd2:
			skip = 4
		case c == 0xcf, c == 0xd3:
			skip = 8
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type, then data
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			items, err = readLen(2)
		case c == 0xdd: // array32
			items, err = readLen(4)
		case c == 0xde: // map16
			items, err = readLen(2)
			items *= 2
		case c == 0xdf: // map32
			items, err = readLen(4)
			items *= 2
		default: // 0xc1 is never used
			return fmt.Errorf("msgpack: invalid code %#x at offset %d", c, pos-1)
		}
		if err != nil {
			return err
		}
		if skip > uint64(len(data)-pos) {
			return errTruncated
		}
		pos += int(skip)
		if items == 0 {
			continue
		}
		// Every value takes at least one byte.
		if items > uint64(len(data)-pos) {
			return fmt.Errorf("msgpack: container at offset %d declares %d values but only %d bytes follow", pos, items, len(data)-pos)
		}
		if len(pending) > maxMsgpackDepth {
			return fmt.Errorf("msgpack: nesting deeper than %d", maxMsgpackDepth)
		}
		pending = append(pending, items)
	}
	return nil
}
