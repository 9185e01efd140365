package deadletter

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestRenderBodyShowsControlsAsEscapes: what JSON, msgpack and text bodies
// may carry raw to a terminal (C1 controls, bidi overrides, bytes that are
// not UTF-8, carriage returns) is shown as escapes; line feeds and tabs of
// a text body stay.
func TestRenderBodyShowsControlsAsEscapes(t *testing.T) {
	cases := []struct {
		name   string
		data   []byte
		header nats.Header
		format BodyFormat
		want   string
	}{
		// JSON escapes C0 controls in strings, but not C1 controls, bidi
		// overrides or invalid UTF-8, which json.Indent copies as they are.
		{"json", []byte("{\"id\":\"a\u009b2J\u202eb\xff\"}\r"), nil, BodyJSON,
			"{\n  \"id\": \"a\\u009b2J\\u202eb\\xff\"\n}\\r"},
		{"msgpack", mustMsgpack(t, map[string]any{"id": "x\x1b]0;t\a\u0085\u2066"}), nil, BodyMsgpack,
			"{\n  \"id\": \"x\\u001b]0;t\\u0007\\u0085\\u2066\"\n}"},
		{"text", []byte("one\r\x0bover\ttab\nnext \u0085\n"), nats.Header{"Content-Type": {"text/plain"}}, BodyText,
			"one\\r\\vover\ttab\nnext \\u0085\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			format, got := RenderBody(c.data, c.header)
			if format != c.format || got != c.want {
				t.Fatalf("RenderBody = %s %q, want %s %q", format, got, c.format, c.want)
			}
		})
	}
}
