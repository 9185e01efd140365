package deadletter

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// This file reads and rewrites the few top-level request fields a dead
// letter's tools need ("id", "deadline") without importing package stream,
// which imports this one. It follows stream.DetectEncoding: Content-Type
// decides, else a body starting with '{' is JSON and anything else msgpack.
// Bodies are outside input (a dead letter is often a body that was refused),
// so the msgpack side is a small walker that neither recurses nor allocates
// by declared lengths: a hostile body cannot exhaust the stack or memory of
// an operator's `processor dlq` command.

// Request field names, as in stream.Request.
const (
	fieldID       = "id"
	fieldDeadline = "deadline"
)

// bodyEncoding is the wire format of a body.
type bodyEncoding int

const (
	encUnknown bodyEncoding = iota
	encJSON
	encMsgpack
)

func detectEncoding(data []byte, header nats.Header) bodyEncoding {
	if ct := header.Get("Content-Type"); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return encUnknown
		case media == "application/json":
			return encJSON
		case media == "application/msgpack", media == "application/x-msgpack", media == "application/vnd.msgpack":
			return encMsgpack
		default:
			return encUnknown
		}
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return encJSON
	}
	return encMsgpack
}

// bodyFields are the top-level string fields of a request body that the
// dead-letter tools look at; empty when absent or unreadable.
type bodyFields struct {
	ID       string `json:"id"`
	Deadline string `json:"deadline"`
}

// readFields reads "id" and "deadline" from a body, best effort: a body that
// does not decode, or a field that is not a string, yields empty strings.
// Field matching follows the decoders the processor uses (encoding/json is
// case-insensitive, msgpack exact; the last duplicate wins).
func readFields(data []byte, header nats.Header) bodyFields {
	var f bodyFields
	switch detectEncoding(data, header) {
	case encJSON:
		// A field of the wrong type is skipped; the others still decode.
		var typeErr *json.UnmarshalTypeError
		if err := json.Unmarshal(data, &f); err != nil && !errors.As(err, &typeErr) {
			return bodyFields{}
		}
	case encMsgpack:
		entries, err := msgpackMap(data)
		if err != nil {
			return bodyFields{}
		}
		for _, e := range entries {
			v, ok := msgpackString(data[e.valStart:e.valEnd])
			if !e.keyIsStr || !ok {
				continue
			}
			switch e.key {
			case fieldID:
				f.ID = v
			case fieldDeadline:
				f.Deadline = v
			}
		}
	}
	return f
}

// errNotAnObject is returned by setFields for a body that is not a JSON
// object or msgpack map.
var errNotAnObject = errors.New("body is not a JSON object or msgpack map")

// setFields returns a copy of the body with the named top-level fields set to
// string values, in the body's own encoding; other fields keep their encoded
// values. A JSON body comes back compacted with its keys sorted.
func setFields(data []byte, header nats.Header, set map[string]string) ([]byte, error) {
	switch detectEncoding(data, header) {
	case encJSON:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return nil, errNotAnObject
		}
		for name, v := range set {
			// encoding/json matches keys case-insensitively: drop every
			// spelling, so the value set here is the one the processor reads.
			for k := range obj {
				if strings.EqualFold(k, name) {
					delete(obj, k)
				}
			}
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			obj[name] = raw
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(obj); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	case encMsgpack:
		entries, err := msgpackMap(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotAnObject, err)
		}
		var kept []mpEntry
		for _, e := range entries {
			if _, replaced := set[e.key]; e.keyIsStr && replaced {
				continue
			}
			kept = append(kept, e)
		}
		out := appendMsgpackMapLen(nil, len(kept)+len(set))
		for _, e := range kept {
			out = append(out, data[e.keyStart:e.valEnd]...)
		}
		for _, name := range slices.Sorted(maps.Keys(set)) {
			out = appendMsgpackString(out, name)
			out = appendMsgpackString(out, set[name])
		}
		return out, nil
	}
	return nil, errNotAnObject
}

// mpEntry is one key/value pair of a top-level msgpack map, as byte offsets.
type mpEntry struct {
	keyStart, valStart, valEnd int
	key                        string
	keyIsStr                   bool
}

var errMsgpackTruncated = errors.New("msgpack: unexpected end of data")

// msgpackMap splits a body whose first value is a msgpack map into its
// entries. Bytes after the map are ignored, as msgpack.Unmarshal does.
func msgpackMap(data []byte) ([]mpEntry, error) {
	if len(data) == 0 {
		return nil, errMsgpackTruncated
	}
	var n uint64
	pos := 1
	switch c := data[0]; {
	case c >= 0x80 && c <= 0x8f:
		n = uint64(c & 0x0f)
	case c == 0xde:
		if len(data) < 3 {
			return nil, errMsgpackTruncated
		}
		n, pos = uint64(binary.BigEndian.Uint16(data[1:])), 3
	case c == 0xdf:
		if len(data) < 5 {
			return nil, errMsgpackTruncated
		}
		n, pos = uint64(binary.BigEndian.Uint32(data[1:])), 5
	default:
		return nil, errNotAnObject
	}
	if n > uint64(len(data)-pos)/2 { // every key and value takes a byte at least
		return nil, errMsgpackTruncated
	}
	entries := make([]mpEntry, 0, n)
	for range n {
		e := mpEntry{keyStart: pos}
		end, err := msgpackValueEnd(data, pos)
		if err != nil {
			return nil, err
		}
		e.key, e.keyIsStr = msgpackString(data[pos:end])
		e.valStart = end
		if e.valEnd, err = msgpackValueEnd(data, end); err != nil {
			return nil, err
		}
		pos = e.valEnd
		entries = append(entries, e)
	}
	return entries, nil
}

// msgpackValueEnd returns the offset just past the msgpack value that starts
// at pos. It counts the values still to skip instead of recursing into
// containers, and refuses a count the remaining bytes could not hold, so its
// cost is bounded by len(data) whatever the declared lengths and nesting.
func msgpackValueEnd(data []byte, pos int) (int, error) {
	pending := uint64(1)
	for pending > 0 {
		if pending > uint64(len(data)-pos) { // every value takes a byte at least
			return 0, errMsgpackTruncated
		}
		pending--
		next, children, err := msgpackHead(data, pos)
		if err != nil {
			return 0, err
		}
		pos = next
		pending += children
	}
	return pos, nil
}

// msgpackDepthWithin reports whether data is one well-formed msgpack value
// (trailing bytes aside) that nests no deeper than maxDepth, so that a
// recursive decoder may be trusted with it.
func msgpackDepthWithin(data []byte, maxDepth int) bool {
	pending := []uint64{1} // values still to read at each open level
	pos := 0
	for len(pending) > 0 {
		top := len(pending) - 1
		if pending[top] == 0 {
			pending = pending[:top]
			continue
		}
		pending[top]--
		next, children, err := msgpackHead(data, pos)
		if err != nil || children > uint64(len(data)-next) {
			return false
		}
		pos = next
		if children > 0 {
			if len(pending) == maxDepth {
				return false
			}
			pending = append(pending, children)
		}
	}
	return true
}

// msgpackHead reads the value at pos. For a scalar it returns the offset
// past it; for an array or map, the offset past its header and the number of
// values nested in it (twice the entries of a map).
func msgpackHead(data []byte, pos int) (next int, children uint64, err error) {
	if pos >= len(data) {
		return 0, 0, errMsgpackTruncated
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
		return 0, 0, errMsgpackTruncated
	}
	return pos + int(size), children, nil
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

// msgpackString decodes b when it is exactly one msgpack string.
func msgpackString(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	var hdr int
	switch c := b[0]; {
	case c >= 0xa0 && c <= 0xbf:
		hdr = 1
	case c == 0xd9:
		hdr = 2
	case c == 0xda:
		hdr = 3
	case c == 0xdb:
		hdr = 5
	default:
		return "", false
	}
	if len(b) < hdr {
		return "", false
	}
	// b was delimited by msgpackValueEnd, so the payload is the rest.
	return string(b[hdr:]), true
}

func appendMsgpackMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
	}
}

func appendMsgpackString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}
