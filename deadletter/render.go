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

// maxRenderDepth bounds the nesting of a msgpack body that RenderBody
// decodes; the msgpack decoder recurses, so a deeper (hostile) body is shown
// as a hex dump instead.
const maxRenderDepth = 64

// RenderBody returns a dead letter's body for a person to read: JSON
// indented, msgpack decoded and shown as indented JSON, other printable
// UTF-8 text as it is, anything else as a hex dump. What a client wrote is
// shown through text.VisibleLines, so that no body can send the terminal a
// command: JSON strings may hold C1 controls, bidi overrides and bytes that
// are not UTF-8 unescaped, text may hold carriage returns and other
// controls unicode.IsSpace counts as space.
//
// A body is shown as msgpack only if it decodes completely as one value:
// most text starts with a byte that is a whole msgpack integer on its own
// ("hello" would read as 104). Without a Content-Type header, printable
// text is shown as text even when it is also whole msgpack (a single
// character is an integer too); a request in msgpack is a map, whose first
// byte never starts UTF-8 text.
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

// msgpackAsJSON decodes data as one msgpack value, and nothing after it,
// and shows it as indented JSON.
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

// isText reports whether data is UTF-8 text of printable characters and
// white space.
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
