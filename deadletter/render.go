package deadletter

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/wire"
)

// BodyFormat says how RenderBody showed a body.
type BodyFormat string

// The formats RenderBody uses.
const (
	BodyJSON    BodyFormat = "json"
	BodyMsgpack BodyFormat = "msgpack"
	BodyText    BodyFormat = "text"
	BodyBinary  BodyFormat = "binary"
)

// maxRenderDepth bounds the nesting of a msgpack body RenderBody decodes,
// as the decoder recurses; a deeper one is shown as a hex dump.
const maxRenderDepth = 64

// RenderBody returns a dead letter's body for a person to read: JSON
// indented, msgpack as indented JSON, other printable UTF-8 text as it is,
// anything else as a hex dump, through text.VisibleLines so that no body
// can act on the terminal.
//
// Msgpack must decode completely as one value: most text starts with a
// byte that is a whole msgpack integer ("hello" would read as 104).
// Without a Content-Type, printable text is text even when it is whole
// msgpack too: a msgpack request is a map, which never starts UTF-8 text.
func RenderBody(data []byte, header nats.Header) (BodyFormat, string) {
	plain := isText(data)
	switch detectEncoding(data, header) {
	case wire.JSON:
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err == nil {
			return BodyJSON, text.VisibleLines(buf.String())
		}
	case wire.MsgPack:
		if plain && header.Get(wire.HeaderContentType) == "" {
			break
		}
		if out, ok := msgpackAsJSON(data); ok {
			return BodyMsgpack, text.VisibleLines(out)
		}
	}
	if plain {
		return BodyText, text.VisibleLines(string(data))
	}
	return BodyBinary, hex.Dump(data)
}

// msgpackAsJSON shows data, one whole msgpack value, as indented JSON.
func msgpackAsJSON(data []byte) (string, bool) {
	if len(data) == 0 || msgpackwalk.Check(data, maxRenderDepth) != nil {
		return "", false
	}
	if end, err := msgpackwalk.ValueEnd(data, 0); err != nil || end != len(data) {
		return "", false
	}
	var v any
	if err := msgpack.Unmarshal(data, &v); err != nil {
		return "", false
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // for example a map with non-string keys
		return "", false
	}
	return string(out), true
}

// isText reports whether data is UTF-8 of printable characters and space.
func isText(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, r := range string(data) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
