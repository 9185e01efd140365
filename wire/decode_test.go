package wire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/wire"
)

// TestDecodeRequestMsgpackTimestampDeadline: a msgpack timestamp (extension
// type -1, in each of its three sizes) is a deadline, as an RFC 3339 string
// is.
func TestDecodeRequestMsgpackTimestampDeadline(t *testing.T) {
	tests := map[string]time.Time{
		"timestamp 32":       time.Unix(1_900_000_000, 0),
		"timestamp 64":       time.Unix(1_900_000_000, 123_456_789),
		"timestamp 96":       time.Date(2500, 1, 2, 3, 4, 5, 6, time.UTC),
		"timestamp 96 early": time.Date(1960, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	for name, at := range tests {
		t.Run(name, func(t *testing.T) {
			body := compactMsgpack(t, map[string]any{
				"id": "ts", "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "deadline": at,
			})
			if !strings.Contains(string(body), "\xff") {
				t.Fatalf("no extension type -1 in % x", body)
			}
			d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
			if err != nil {
				t.Fatal(err)
			}
			if !d.DeadlineAt.Equal(at) {
				t.Fatalf("DeadlineAt = %v, want %v", d.DeadlineAt, at)
			}
			if d.Deadline != at.UTC().Format(time.RFC3339Nano) {
				t.Fatalf("Deadline = %q", d.Deadline)
			}
		})
	}
	// The string form still works in msgpack, and other kinds say what a
	// deadline may be.
	for _, deadline := range []any{"2030-01-02T03:04:05Z", nil} {
		body := compactMsgpack(t, map[string]any{"messages": []any{map[string]any{"role": "user"}}, "deadline": deadline})
		if _, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); err != nil {
			t.Errorf("deadline %v: %v", deadline, err)
		}
	}
	body := compactMsgpack(t, map[string]any{"messages": []any{map[string]any{"role": "user"}}, "deadline": 1_900_000_000})
	_, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
	if want := "deadline must be an RFC 3339 string or a msgpack timestamp, not an integer"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("integer deadline: err = %v, want %q", err, want)
	}
}

// TestDecodeRequestNeitherJSONNorMsgpack: a body that is neither a JSON
// object nor a msgpack map is told so in plain words, with what it looks
// like.
func TestDecodeRequestNeitherJSONNorMsgpack(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header nats.Header
		want   string
	}{
		{"plain text", "hello there", nil, `bad request: body is neither a JSON object nor msgpack: it reads as text, "hello there"`},
		{"long text", strings.Repeat("é", 100), nil, `it reads as text, "` + strings.Repeat("é", 32) + `…"`},
		{"text declared msgpack", "hello", hdr("Content-Type", "application/msgpack"), `body is not a msgpack map: it reads as text, "hello"`},
		{"msgpack list", "\x92\x01\x02", nil, "body is neither a JSON object nor msgpack: it starts with a list (byte 0x92)"},
		{"a JSON list", `["hello"]`, nil, `it reads as text, "[\"hello\"]"`},
		{"JSON list declared", `["hello"]`, hdr("Content-Type", "application/json"), "body must be a JSON object, not a list"},
		{"text declared JSON", "hello", hdr("Content-Type", "application/json"), "body is not valid JSON: invalid character 'h'"},
		{"empty", "", nil, "body is empty"},
		{"truncated msgpack", "\x82\xa2id", nil, "body is not valid msgpack: unexpected end of data"},
		// One map, as a JSON body is one object: bytes after it are refused.
		{"bytes after the msgpack map", "\x81\xa2id\xa1x\xa3abc", nil, "body is not valid msgpack: 4 bytes after its map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = nats.Header{}
			}
			_, err := wire.DecodeRequest([]byte(tt.body), header, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadRequest saying %q", err, tt.want)
			}
		})
	}
}

// TestDecodeRequestRefusesInvalidUTF8: JSON text is UTF-8 (RFC 8259,
// section 8.1) and a msgpack str is UTF-8 by the msgpack spec, so a request
// with other bytes in any string is refused, not read with those bytes
// replaced: an id, a message or metadata would otherwise come back other
// than it was sent.
func TestDecodeRequestRefusesInvalidUTF8(t *testing.T) {
	msg := func(content string) []any { return []any{map[string]any{"role": "user", "content": content}} }
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"json id", []byte("{\"id\":\"d6\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), "body is not valid UTF-8 at byte 9"},
		{"json content", []byte("{\"messages\":[{\"role\":\"user\",\"content\":\"h\xc3\"}]}"), "body is not valid UTF-8 at byte 40"},
		{"json metadata key", []byte("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"metadata\":{\"\xed\xa0\x80\":1}}"), "body is not valid UTF-8"},
		// encoding/json reads an unpaired surrogate escape as U+FFFD too.
		{"json lone high surrogate", []byte(`{"id":"d6\ud800","messages":[{"role":"user","content":"hi"}]}`), "a lone UTF-16 surrogate escape at byte 9"},
		{"json lone low surrogate", []byte(`{"messages":[{"role":"user","content":"hi"}],"metadata":{"k":"\udc00"}}`), "a lone UTF-16 surrogate escape"},
		{"json reversed pair", []byte(`{"messages":[{"role":"user","content":"\udc00\ud800"}]}`), "a lone UTF-16 surrogate escape"},
		{"msgpack content", compactMsgpack(t, map[string]any{"messages": msg("h\xff")}), "body is not valid msgpack: the string at offset"},
		{"msgpack metadata value", compactMsgpack(t, map[string]any{"messages": msg("hi"), "metadata": map[string]any{"k": "\xc0\x80"}}),
			"body is not valid msgpack: the string at offset"},
		{"msgpack unknown field", compactMsgpack(t, map[string]any{"messages": msg("hi"), "x\xfe": 1}), "body is not valid msgpack: the string at offset"},
		// A bin decodes into a string too, unchecked by the walk.
		{"msgpack content as bin", []byte("\x81\xa8messages\x91\x82\xa4role\xa4user\xa7content\xc4\x02h\xff"),
			"messages[0].content must be a string, not bytes that are not UTF-8"},
		{"msgpack metadata key as bin", []byte("\x82\xa8messages\x91\x82\xa4role\xa4user\xa7content\xa2hi\xa8metadata\x81\xc4\x01\xff\x01"),
			"metadata has a key of bytes that are not UTF-8"},
		{"msgpack cache_scope as bin", []byte("\x82\xa8messages\x91\x82\xa4role\xa4user\xa7content\xa2hi\xabcache_scope\xc4\x01\xff"),
			"cache_scope must be a string, not bytes that are not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(tt.body, nats.Header{}, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadRequest saying %q", err, tt.want)
			}
		})
	}
	// Valid UTF-8 of every width passes, as do a surrogate pair and an
	// escaped backslash before a u.
	ok := compactMsgpack(t, map[string]any{"messages": msg("é€😀"), "metadata": map[string]any{"k": "ü"}})
	if _, err := wire.DecodeRequest(ok, nats.Header{}, 1, prefixes); err != nil {
		t.Errorf("valid UTF-8 refused: %v", err)
	}
	d, err := wire.DecodeRequest([]byte(`{"messages":[{"role":"user","content":"\ud83d\ude00 \\ud800"}]}`), nats.Header{}, 1, prefixes)
	if err != nil || d.Messages[0].Content != `😀 \ud800` {
		t.Errorf("a surrogate pair and an escaped backslash: %q, %v", d.Messages, err)
	}
}

// TestDecodeRequestFieldErrorsInPlainWords: a field of the wrong kind is
// named, with what it must be and what it is, in either encoding; no
// decoder internals or Go types reach the error.
func TestDecodeRequestFieldErrorsInPlainWords(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	mp := func(kv ...any) []byte {
		m := map[string]any{"id": "f", "messages": msgs}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return compactMsgpack(t, m)
	}
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"json id", []byte(`{"id":5,"messages":[{"role":"user"}]}`), "id must be a string, not a number"},
		{"json messages", []byte(`{"messages":"hi"}`), "messages must be a list of {role, content} objects, not a string"},
		{"json role", []byte(`{"messages":[{"role":1}]}`), "messages[0].role must be a string, not a number"},
		{"json message not an object", []byte(`{"messages":[{"role":"user","content":"a"},5]}`), "messages[1] must be a {role, content} object, not a number"},
		{"json content of the third", []byte(`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":["c"]}]}`),
			"messages[2].content must be a string, not a list"},
		{"json max_tokens", []byte(`{"messages":[{"role":"user"}],"max_tokens":"many"}`), "max_tokens must be an integer, not a string"},
		{"json max_tokens fraction", []byte(`{"messages":[{"role":"user"}],"max_tokens":1.5}`), `max_tokens must be an integer, not "1.5"`},
		{"json temperature", []byte(`{"messages":[{"role":"user"}],"temperature":"hot"}`), "temperature must be a number, not a string"},
		{"json deadline", []byte(`{"messages":[{"role":"user"}],"deadline":1900000000}`), "deadline must be an RFC 3339 string, not a number"},
		{"json bad deadline", []byte(`{"messages":[{"role":"user"}],"deadline":"tomorrow"}`), `deadline "tomorrow" is not an RFC 3339 time`},
		{"json schema", []byte(`{"messages":[{"role":"user"}],"response_schema":[1]}`), "response_schema must be a JSON Schema object, not a list"},
		{"json reply_to", []byte(`{"messages":[{"role":"user"}],"reply_to":true}`), "reply_to must be a string, not true or false"},
		{"msgpack id", mp("id", 5), "id must be a string, not an integer"},
		{"msgpack messages", mp("messages", "hi"), "messages must be a list of {role, content} objects, not a string"},
		{"msgpack message", mp("messages", []any{"hi"}), "messages[0] must be a {role, content} object, not a string"},
		{"msgpack role", mp("messages", []any{msgs[0], map[string]any{"role": 1}}), "messages[1].role must be a string, not an integer"},
		{"msgpack max_tokens", mp("max_tokens", "many"), "max_tokens must be an integer, not a string"},
		{"msgpack temperature", mp("temperature", "hot"), "temperature must be a number, not a string"},
		{"msgpack schema", mp("response_schema", []any{1}), "response_schema must be a JSON Schema object, not a list"},
		{"msgpack reply_to", mp("reply_to", 1.5), "reply_to must be a string, not a number"},
		{"msgpack schema with a number key", []byte("\x82\xa8messages\x91\x81\xa4role\xa4user\xafresponse_schema\x81\x01\xa1x"),
			"response_schema must be a JSON Schema object: keys strings"},
		{"msgpack schema with an extension", []byte("\x82\xa8messages\x91\x81\xa4role\xa4user\xafresponse_schema\x81\xa4type\xd4\x07\x00"),
			"response_schema must be a JSON Schema object: keys strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(tt.body, nats.Header{}, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadRequest saying %q", err, tt.want)
			}
			for _, internal := range []string{"Go struct", "msgpack:", "code=", "wire.", "chain.", "json:"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("err %q shows decoder internals (%q)", err, internal)
				}
			}
		})
	}
}

// TestDecodeRequestMsgpackFieldsLikeAStruct: decoding field by field keeps
// what decoding into the struct did: exact keys, the last duplicate winning,
// other keys and non-string keys ignored, nil as absent.
func TestDecodeRequestMsgpackFieldsLikeAStruct(t *testing.T) {
	// {"id":"first", 7:"x", "ID":"upper", "extra":[1], "messages":[{"role":"user","content":"hi","name":"n"}], "temperature":nil, "id":"last"}
	var b []byte
	b = append(b, 0x87)
	b = append(b, mpStr("id")...)
	b = append(b, mpStr("first")...)
	b = append(b, 0x07)
	b = append(b, mpStr("x")...)
	b = append(b, mpStr("ID")...)
	b = append(b, mpStr("upper")...)
	b = append(b, mpStr("extra")...)
	b = append(b, 0x91, 0x01)
	b = append(b, mpStr("messages")...)
	b = append(b, 0x91, 0x83)
	b = append(b, mpStr("role")...)
	b = append(b, mpStr("user")...)
	b = append(b, mpStr("content")...)
	b = append(b, mpStr("hi")...)
	b = append(b, mpStr("name")...)
	b = append(b, mpStr("n")...)
	b = append(b, mpStr("temperature")...)
	b = append(b, 0xc0)
	b = append(b, mpStr("id")...)
	b = append(b, mpStr("last")...)
	d, err := wire.DecodeRequest(b, nats.Header{}, 1, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "last" || len(d.Messages) != 1 || d.Messages[0].Role != "user" || d.Messages[0].Content != "hi" || d.Temperature != nil {
		t.Fatalf("decoded %+v", d.Request)
	}
	var viaStruct wire.Request
	if err := msgpack.Unmarshal(b, &viaStruct); err == nil && viaStruct.ID != d.ID {
		t.Fatalf("struct decoding reads id %q, field decoding %q", viaStruct.ID, d.ID)
	}
}

func mpStr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }
