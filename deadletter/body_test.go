package deadletter

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/internal/msgpackwalk"
)

func mustMsgpack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadFields(t *testing.T) {
	jsonCT := nats.Header{"Content-Type": []string{"application/json"}}
	mpCT := nats.Header{"Content-Type": []string{"application/msgpack"}}
	cases := []struct {
		name   string
		data   []byte
		header nats.Header
		want   bodyFields
	}{
		{"json", []byte(`{"id":"a","deadline":"2030-01-01T00:00:00Z","messages":[]}`), nil, bodyFields{"a", "2030-01-01T00:00:00Z"}},
		{"json with leading space", []byte(" \n{\"id\":\"a\"}"), nil, bodyFields{ID: "a"}},
		{"json keys fold like encoding/json", []byte(`{"ID":"a"}`), nil, bodyFields{ID: "a"}},
		{"json id of the wrong type", []byte(`{"id":5,"deadline":"d"}`), nil, bodyFields{Deadline: "d"}},
		{"json syntax error", []byte(`{"id":"a"`), nil, bodyFields{}},
		{"json array", []byte(`[1,2]`), jsonCT, bodyFields{}},
		{"msgpack", mustMsgpack(t, map[string]any{"messages": []any{map[string]any{"role": "user"}}, "id": "b", "deadline": "x"}), nil, bodyFields{"b", "x"}},
		{"msgpack by content type", mustMsgpack(t, map[string]any{"id": "c"}), mpCT, bodyFields{ID: "c"}},
		{"msgpack keys are exact", mustMsgpack(t, map[string]any{"ID": "c"}), nil, bodyFields{}},
		{"msgpack id of the wrong type", mustMsgpack(t, map[string]any{"id": 7}), nil, bodyFields{}},
		{"msgpack timestamp deadline", mustMsgpack(t, map[string]any{"id": "t", "deadline": time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)}), nil,
			bodyFields{"t", "2030-01-02T03:04:05.000000006Z"}},
		{"msgpack timestamp id", mustMsgpack(t, map[string]any{"id": time.Unix(5, 0)}), nil, bodyFields{}},
		// -2^63 seconds: no RFC 3339 time, and no year with the wrong sign.
		{"msgpack timestamp outside RFC 3339", append([]byte{0x82, 0xa2, 'i', 'd', 0xa1, 't',
			0xa8, 'd', 'e', 'a', 'd', 'l', 'i', 'n', 'e', 0xc7, 12, 0xff, 0, 0, 0, 0, 0x80}, make([]byte, 7)...), nil,
			bodyFields{ID: "t"}},
		{"msgpack not a map", mustMsgpack(t, []string{"id", "x"}), nil, bodyFields{}},
		{"msgpack truncated", mustMsgpack(t, map[string]any{"id": "abc"})[:5], nil, bodyFields{}},
		{"unsupported content type", []byte(`{"id":"a"}`), nats.Header{"Content-Type": []string{"text/plain"}}, bodyFields{}},
		{"empty", nil, nil, bodyFields{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := readFields(c.data, c.header); got != c.want {
				t.Fatalf("readFields = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestReadFieldsHostileMsgpack: declared lengths far beyond the data and
// deep nesting are refused quickly, without allocating by declared length
// or recursing.
func TestReadFieldsHostileMsgpack(t *testing.T) {
	deep := append([]byte{0x81, 0xa1, 'x'}, bytes.Repeat([]byte{0x91}, 4<<20)...)
	deep = append(deep, 0xc0)
	cases := map[string][]byte{
		"array32 of 4G elements":  {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32 of 4G entries":     {0xdf, 0xff, 0xff, 0xff, 0xff},
		"str32 of 4 GB":           {0x81, 0xa2, 'i', 'd', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"nested map32 in a value": {0x81, 0xa1, 'x', 0xdf, 0xff, 0xff, 0xff, 0xff, 0x00},
		"never-used code":         {0x81, 0xa1, 'x', 0xc1},
	}
	for name, data := range cases {
		if got := readFields(data, nil); got != (bodyFields{}) {
			t.Errorf("%s: %+v", name, got)
		}
		if _, err := setFields(data, nil, map[string]string{"id": "x"}); err == nil {
			t.Errorf("%s: setFields accepted it", name)
		}
	}
	// 4 Mi levels of nesting is valid msgpack; it must not blow the stack.
	entries, err := msgpackwalk.MapEntries(deep)
	if err != nil || len(entries) != 1 || entries[0].ValEnd != len(deep) {
		t.Fatalf("deep nesting: %v %+v", err, entries)
	}
}

func TestSetFieldsJSON(t *testing.T) {
	body := []byte(`{"ID":"old","Deadline":"old","messages":[{"role":"user","content":"<hi> & bye"}],"n":1.50}`)
	out, err := setFields(body, nil, map[string]string{"id": "new", "deadline": "2030-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || string(got["id"]) != `"new"` || string(got["deadline"]) != `"2030-01-01T00:00:00Z"` || string(got["n"]) != "1.50" {
		t.Fatalf("rewritten body %s", out)
	}
	if !strings.Contains(string(out), "<hi> & bye") {
		t.Fatalf("content changed: %s", out)
	}
	if f := readFields(out, nil); f.ID != "new" || f.Deadline != "2030-01-01T00:00:00Z" {
		t.Fatalf("read back %+v", f)
	}
	for _, bad := range []string{`[1]`, `null`, `{"id":`} {
		if _, err := setFields([]byte(bad), nil, map[string]string{"id": "x"}); err == nil {
			t.Errorf("setFields(%s) succeeded", bad)
		}
	}
}

func TestSetFieldsMsgpack(t *testing.T) {
	long := strings.Repeat("y", 70000)
	body := mustMsgpack(t, map[string]any{"id": "old", "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 5})
	out, err := setFields(body, nil, map[string]string{"deadline": long, "id": "new"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := msgpack.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got["id"] != "new" || got["deadline"] != long || got["max_tokens"] != int8(5) {
		t.Fatalf("rewritten body %v", got)
	}
	// A map with 16 entries or more needs a map16 header.
	big := map[string]int{}
	for i := range 20 {
		big[strings.Repeat("k", i+1)] = i
	}
	out, err = setFields(mustMsgpack(t, big), nil, map[string]string{"id": "z"})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := msgpack.Unmarshal(out, &got); err != nil || len(got) != 21 || got["id"] != "z" {
		t.Fatalf("map16: %v %v", err, got)
	}
}

// FuzzBodyFields: reading and rewriting the fields of any body never panics,
// and a rewritten body reads back the values set.
func FuzzBodyFields(f *testing.F) {
	f.Add([]byte(`{"id":"a","deadline":"d"}`))
	f.Add(mustMsgpack(f, map[string]any{"id": "a", "x": []any{1, "b", map[string]any{"c": nil}}}))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa1, 'x', 0xc7, 0x01, 0x05, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readFields(data, nil)
		_, _ = RenderBody(data, nil)
		out, err := setFields(data, nil, map[string]string{"id": "fuzz-id", "deadline": "fuzz-deadline"})
		if err != nil {
			return
		}
		if got := readFields(out, nil); got.ID != "fuzz-id" || got.Deadline != "fuzz-deadline" {
			t.Fatalf("rewritten %x reads back %+v", out, got)
		}
	})
}

func TestRenderBody(t *testing.T) {
	deep := append(bytes.Repeat([]byte{0x91}, 100), 0xc0)
	cases := []struct {
		name   string
		data   []byte
		header nats.Header
		format BodyFormat
		want   string
	}{
		{"json", []byte(`{"id":"a","n":[1]}`), nil, BodyJSON, "{\n  \"id\": \"a\",\n  \"n\": [\n    1\n  ]\n}"},
		{"msgpack", mustMsgpack(t, map[string]any{"id": "a"}), nil, BodyMsgpack, "{\n  \"id\": \"a\"\n}"},
		{"broken json is text", []byte(`{"id":`), nil, BodyText, `{"id":`},
		{"text", []byte("hello"), nats.Header{"Content-Type": {"text/plain"}}, BodyText, "hello"},
		{"binary", []byte{0xc1, 0x00}, nil, BodyBinary, "00000000  c1 00                                             |..|\n"},
		{"deep msgpack is dumped", deep, nil, BodyBinary, hex.Dump(deep)},
		// Text sent without a Content-Type is guessed to be msgpack, and
		// its first byte is a whole msgpack integer ('g' is 103): it is
		// not msgpack unless it decodes completely as one value.
		{"text without a content type", []byte("good morning, sir!"), nil, BodyText, "good morning, sir!"},
		{"one character without a content type", []byte("a"), nil, BodyText, "a"},
		{"multi-line UTF-8 text", []byte("天气\nnext line\n"), nil, BodyText, "天气\nnext line\n"},
		{"msgpack followed by more", append(mustMsgpack(t, map[string]any{"id": "a"}), 0xc1), nil, BodyBinary,
			hex.Dump(append(mustMsgpack(t, map[string]any{"id": "a"}), 0xc1))},
		{"declared msgpack that is whole", []byte{0x05}, nats.Header{"Content-Type": {"application/msgpack"}}, BodyMsgpack, "5"},
		{"declared msgpack that is text", []byte("hello"), nats.Header{"Content-Type": {"application/msgpack"}}, BodyText, "hello"},
		{"binary without a content type", []byte{0x01, 0x02, 0xff, 0xfe}, nil, BodyBinary, hex.Dump([]byte{0x01, 0x02, 0xff, 0xfe})},
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
