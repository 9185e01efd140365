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
// indented, msgpack decoded and shown as indented JSON, other UTF-8 text as
// it is, anything else as a hex dump.
func RenderBody(data []byte, header nats.Header) (BodyFormat, string) {
	switch detectEncoding(data, header) {
	case wire.JSON:
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err == nil {
			return BodyJSON, buf.String()
		}
	case wire.MsgPack:
		if out, ok := msgpackAsJSON(data); ok {
			return BodyMsgpack, out
		}
	}
	if utf8.Valid(data) && printable(data) {
		return BodyText, string(data)
	}
	return BodyBinary, hex.Dump(data)
}

func msgpackAsJSON(data []byte) (string, bool) {
	if len(data) == 0 || msgpackwalk.Check(data, maxRenderDepth) != nil {
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

func printable(data []byte) bool {
	for _, r := range string(data) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
