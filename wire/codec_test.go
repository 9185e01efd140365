package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/textproto"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// prefixes are the default DETOUR_REPLY_PREFIXES.
var prefixes = []string{"detour.results.", "_INBOX."}

func hdr(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestDetectEncoding(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		header  nats.Header
		want    wire.Encoding
		wantErr bool
	}{
		{name: "header json", data: "\x81", header: hdr("Content-Type", "application/json"), want: wire.JSON},
		{name: "header msgpack", data: "{", header: hdr("Content-Type", "application/msgpack"), want: wire.MsgPack},
		{name: "header x-msgpack", data: "{", header: hdr("Content-Type", "application/x-msgpack"), want: wire.MsgPack},
		{name: "header vnd.msgpack", data: "{", header: hdr("Content-Type", "application/vnd.msgpack"), want: wire.MsgPack},
		{name: "header json with charset", data: "\x81", header: hdr("Content-Type", "application/json; charset=utf-8"), want: wire.JSON},
		{name: "header json upper case", data: "\x81", header: hdr("Content-Type", "Application/JSON"), want: wire.JSON},
		{name: "header unsupported", data: "{}", header: hdr("Content-Type", "text/plain"), wantErr: true},
		{name: "header unreadable", data: "{}", header: hdr("Content-Type", "application/json; ="), wantErr: true},
		{name: "no header brace", data: `{"id":"a"}`, want: wire.JSON},
		{name: "nil header brace", data: `{}`, header: nil, want: wire.JSON},
		{name: "no header leading whitespace", data: " \t\r\n{}", want: wire.JSON},
		{name: "no header msgpack map", data: "\x81\xa2id\xa1a", want: wire.MsgPack},
		{name: "no header array is msgpack", data: "[]", want: wire.MsgPack},
		{name: "no header empty", data: "", want: wire.MsgPack},
		{name: "no header only whitespace", data: "   ", want: wire.MsgPack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil && !strings.HasPrefix(tt.name, "nil header") {
				header = nats.Header{}
			}
			got, err := wire.DetectEncoding([]byte(tt.data), header)
			if tt.wantErr {
				if !errors.Is(err, wire.ErrBadRequest) {
					t.Fatalf("err = %v, want ErrBadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Fatalf("encoding = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEncodingContentType(t *testing.T) {
	if got := wire.JSON.ContentType(); got != "application/json" {
		t.Errorf("JSON.ContentType() = %q", got)
	}
	if got := wire.MsgPack.ContentType(); got != "application/msgpack" {
		t.Errorf("MsgPack.ContentType() = %q", got)
	}
}

// fullRequest sets every field of a request (docs/requests.md).
func fullRequest() wire.Request {
	temp := 0.25
	return wire.Request{
		ID: "req-1",
		Messages: []chain.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "天气 today?"},
		},
		MaxTokens:   256,
		Temperature: &temp,
		ResponseSchema: map[string]any{
			"type":     "object",
			"required": []any{"answer"},
			"properties": map[string]any{
				"answer": map[string]any{"type": "string"},
			},
		},
		ReplyTo:    "_INBOX.abc.1",
		Deadline:   "2030-01-02T03:04:05Z",
		Metadata:   chain.Metadata{"tenant": "acme", "trace": "t-1"},
		Cache:      &wire.CacheControl{NoCache: true, StaleIfError: new(int64(60))},
		CacheScope: "tenant-acme",
	}
}

// normaliseSchema turns a schema into its JSON form, so that numbers and
// slices compare equal whichever decoder produced them.
func normaliseSchema(t *testing.T, s map[string]any) any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDecodeRequestRoundTrip(t *testing.T) {
	want := fullRequest()
	jsonBody, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	mpBody, err := msgpack.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		body   []byte
		header nats.Header
		enc    wire.Encoding
	}{
		{"json sniffed", jsonBody, nats.Header{}, wire.JSON},
		{"json header", jsonBody, hdr("Content-Type", "application/json"), wire.JSON},
		{"msgpack sniffed", mpBody, nats.Header{}, wire.MsgPack},
		{"msgpack header", mpBody, hdr("Content-Type", "application/msgpack"), wire.MsgPack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := wire.DecodeRequest(tt.body, tt.header, 7, prefixes)
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if d.Encoding != tt.enc {
				t.Errorf("Encoding = %v, want %v", d.Encoding, tt.enc)
			}
			if d.ID != want.ID {
				t.Errorf("ID = %q, want %q", d.ID, want.ID)
			}
			if !reflect.DeepEqual(d.Messages, want.Messages) {
				t.Errorf("Messages = %+v, want %+v", d.Messages, want.Messages)
			}
			if d.MaxTokens != want.MaxTokens {
				t.Errorf("MaxTokens = %d, want %d", d.MaxTokens, want.MaxTokens)
			}
			if d.Temperature == nil || *d.Temperature != *want.Temperature {
				t.Errorf("Temperature = %v, want %v", d.Temperature, *want.Temperature)
			}
			if got, exp := normaliseSchema(t, d.ResponseSchema), normaliseSchema(t, want.ResponseSchema); !reflect.DeepEqual(got, exp) {
				t.Errorf("ResponseSchema = %v, want %v", got, exp)
			}
			if d.ReplyTo != want.ReplyTo {
				t.Errorf("ReplyTo = %q, want %q", d.ReplyTo, want.ReplyTo)
			}
			if d.Deadline != want.Deadline {
				t.Errorf("Deadline = %q, want %q", d.Deadline, want.Deadline)
			}
			if exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC); !d.DeadlineAt.Equal(exp) {
				t.Errorf("DeadlineAt = %v, want %v", d.DeadlineAt, exp)
			}
			if !reflect.DeepEqual(d.Metadata, want.Metadata) {
				t.Errorf("Metadata = %v, want %v", d.Metadata, want.Metadata)
			}
		})
	}
}

func TestDecodeRequestMinimal(t *testing.T) {
	d, err := wire.DecodeRequest([]byte(`{"id":"x","messages":[{"role":"user","content":"hi"}]}`), nats.Header{}, 1, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	if d.Temperature != nil || d.MaxTokens != 0 || d.ResponseSchema != nil || d.Metadata != nil {
		t.Errorf("optional fields should stay unset: %+v", d.Request)
	}
	if !d.DeadlineAt.IsZero() {
		t.Errorf("DeadlineAt = %v, want zero without a deadline", d.DeadlineAt)
	}
}

func TestDecodeRequestID(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name    string
		body    string
		header  nats.Header
		seq     uint64
		wantID  string
		wantErr bool
	}{
		{name: "field", body: `{"id":"abc",` + msgs + `}`, header: hdr(nats.MsgIdHdr, "hdr-id"), seq: 9, wantID: "abc"},
		{name: "msg id header", body: `{` + msgs + `}`, header: hdr(nats.MsgIdHdr, "hdr-id"), seq: 9, wantID: "hdr-id"},
		// An id given empty is not a subject token (docs/requests.md, id); one left
		// out, or null, falls back to the header.
		{name: "empty field", body: `{"id":"",` + msgs + `}`, header: hdr(nats.MsgIdHdr, "hdr-id"), seq: 9, wantErr: true},
		{name: "null field falls back to header", body: `{"id":null,` + msgs + `}`, header: hdr(nats.MsgIdHdr, "hdr-id"), seq: 9, wantID: "hdr-id"},
		{name: "empty msgpack field", body: "\x82\xa2id\xa0\xa8messages\x91\x82\xa4role\xa4user\xa7content\xa2hi", seq: 9, wantErr: true},
		{name: "nil msgpack field falls back to seq", body: "\x82\xa2id\xc0\xa8messages\x91\x82\xa4role\xa4user\xa7content\xa2hi", seq: 9, wantID: "9"},
		{name: "stream seq", body: `{` + msgs + `}`, header: nats.Header{}, seq: 42, wantID: "42"},
		{name: "empty header falls back to seq", body: `{` + msgs + `}`, header: hdr(nats.MsgIdHdr, ""), seq: 43, wantID: "43"},
		{name: "128 bytes", body: `{"id":"` + strings.Repeat("a", 128) + `",` + msgs + `}`, seq: 1, wantID: strings.Repeat("a", 128)},
		{name: "utf-8", body: `{"id":"请求-1",` + msgs + `}`, seq: 1, wantID: "请求-1"},
		{name: "space", body: `{"id":"a b",` + msgs + `}`, wantErr: true},
		{name: "tab", body: `{"id":"a\tb",` + msgs + `}`, wantErr: true},
		{name: "newline", body: `{"id":"a\nb",` + msgs + `}`, wantErr: true},
		{name: "dot", body: `{"id":"a.b",` + msgs + `}`, wantErr: true},
		{name: "star", body: `{"id":"*",` + msgs + `}`, wantErr: true},
		{name: "gt", body: `{"id":"a>",` + msgs + `}`, wantErr: true},
		{name: "129 bytes", body: `{"id":"` + strings.Repeat("a", 129) + `",` + msgs + `}`, wantErr: true},
		{name: "bad msg id header", body: `{` + msgs + `}`, header: hdr(nats.MsgIdHdr, "a.b"), wantErr: true},
		{name: "spaces in msg id header", body: `{` + msgs + `}`, header: hdr(nats.MsgIdHdr, "a b"), wantErr: true},
		{name: "id not a string", body: `{"id":5,` + msgs + `}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = nats.Header{}
			}
			d, err := wire.DecodeRequest([]byte(tt.body), header, tt.seq, prefixes)
			if tt.wantErr {
				if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), "id") {
					t.Fatalf("err = %v, want ErrBadRequest about the id", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if d.ID != tt.wantID {
				t.Errorf("ID = %q, want %q", d.ID, tt.wantID)
			}
			if want := "detour.results." + tt.wantID; d.ReplyTo != want {
				t.Errorf("ReplyTo = %q, want %q", d.ReplyTo, want)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"", " ", "a b", "a.b", ".", "*", ">", "a*", "x\x00", strings.Repeat("z", 129)} {
		if err := wire.ValidateID(id); !errors.Is(err, wire.ErrBadRequest) {
			t.Errorf("ValidateID(%q) = %v, want ErrBadRequest", id, err)
		}
	}
	for _, id := range []string{"a", "42", "A_b-c", "01HXYZ", strings.Repeat("z", 128)} {
		if err := wire.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
}

func TestDecodeRequestInvalid(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header nats.Header
	}{
		{name: "no messages", body: `{"id":"a"}`},
		{name: "null messages", body: `{"id":"a","messages":null}`},
		{name: "empty messages", body: `{"id":"a","messages":[]}`},
		{name: "message without role", body: `{"id":"a","messages":[{"content":"hi"}]}`},
		{name: "second message without role", body: `{"id":"a","messages":[{"role":"user","content":"hi"},{"role":"","content":"x"}]}`},
		{name: "messages not a list", body: `{"id":"a","messages":"hi"}`},
		{name: "bad deadline", body: `{"id":"a","messages":[{"role":"user"}],"deadline":"tomorrow"}`},
		{name: "deadline without zone", body: `{"id":"a","messages":[{"role":"user"}],"deadline":"2030-01-02T03:04:05"}`},
		{name: "negative max_tokens", body: `{"id":"a","messages":[{"role":"user"}],"max_tokens":-1}`},
		{name: "negative temperature", body: `{"id":"a","messages":[{"role":"user"}],"temperature":-0.5}`},
		{name: "metadata with an object", body: `{"id":"a","messages":[{"role":"user"}],"metadata":{"n":{"m":1}}}`},
		{name: "metadata not an object", body: `{"id":"a","messages":[{"role":"user"}],"metadata":"acme"}`},
		{name: "truncated json", body: `{"id":"a","messages":[{"role":"us`},
		{name: "json as msgpack", body: `{"id":"a","messages":[{"role":"user"}]}`, header: hdr("Content-Type", "application/msgpack")},
		{name: "garbage msgpack", body: "\xc1\xc1\xc1"},
		{name: "empty body", body: ""},
		{name: "unsupported content type", body: `{"id":"a","messages":[{"role":"user"}]}`, header: hdr("Content-Type", "text/plain")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == nil {
				header = nats.Header{}
			}
			_, err := wire.DecodeRequest([]byte(tt.body), header, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			if errors.Is(err, wire.ErrBadReplySubject) {
				t.Fatalf("err = %v also wraps ErrBadReplySubject", err)
			}
		})
	}
}

func TestDecodeRequestReplyTo(t *testing.T) {
	tests := []struct {
		name    string
		field   string
		header  string
		want    string
		wantErr bool
	}{
		{name: "default", want: "detour.results.r1"},
		{name: "header used when field empty", header: "_INBOX.hdr.2", want: "_INBOX.hdr.2"},
		{name: "field wins over header", field: "_INBOX.abc.1", header: "_INBOX.hdr.2", want: "_INBOX.abc.1"},
		{name: "inbox", field: "_INBOX.abc.1", want: "_INBOX.abc.1"},
		{name: "own result subject", field: "detour.results.r1", want: "detour.results.r1"},
		{name: "another request's result subject", field: "detour.results.x", wantErr: true},
		{name: "below another result subject", field: "detour.results.r1.x", wantErr: true},
		{name: "js api", field: "$JS.API.STREAM.DELETE.X", wantErr: true},
		{name: "js api via header", header: "$JS.API.STREAM.DELETE.DETOUR_REQUESTS", wantErr: true},
		{name: "other subject", field: "foo.bar", wantErr: true},
		{name: "inbox alone", field: "_INBOX.", wantErr: true},
		{name: "inbox no dot", field: "_INBOX", wantErr: true},
		{name: "results alone", field: "detour.results.", wantErr: true},
		{name: "wildcard", field: "_INBOX.a.*", wantErr: true},
		{name: "full wildcard", field: "_INBOX.a.>", wantErr: true},
		{name: "empty token", field: "_INBOX..x", wantErr: true},
		{name: "trailing dot", field: "_INBOX.a.", wantErr: true},
		{name: "space", field: "_INBOX.a b", wantErr: true},
		{name: "leading space", field: " _INBOX.a", wantErr: true},
		{name: "tab", field: "_INBOX.a\tb", wantErr: true},
		{name: "prefix lookalike", field: "detour.resultsX.y", wantErr: true},
		{name: "requests subject", field: "detour.requests.default", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(wire.Request{
				ID:       "r1",
				Messages: []chain.Message{{Role: "user", Content: "hi"}},
				ReplyTo:  tt.field,
			})
			if err != nil {
				t.Fatal(err)
			}
			header := nats.Header{}
			if tt.header != "" {
				header.Set(wire.HeaderReplyTo, tt.header)
			}
			d, err := wire.DecodeRequest(body, header, 1, prefixes)
			if tt.wantErr {
				if !errors.Is(err, wire.ErrBadReplySubject) {
					t.Fatalf("err = %v, want ErrBadReplySubject", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if d.ReplyTo != tt.want {
				t.Errorf("ReplyTo = %q, want %q", d.ReplyTo, tt.want)
			}
		})
	}
}

func TestValidateReplySubjectPrefixes(t *testing.T) {
	if err := wire.ValidateReplySubject("replies.a", []string{"replies."}); err != nil {
		t.Errorf("custom prefix refused: %v", err)
	}
	if err := wire.ValidateReplySubject("_INBOX.a", []string{"replies."}); !errors.Is(err, wire.ErrBadReplySubject) {
		t.Errorf("subject outside custom prefixes: err = %v, want ErrBadReplySubject", err)
	}
	if err := wire.ValidateReplySubject("_INBOX.a", nil); !errors.Is(err, wire.ErrBadReplySubject) {
		t.Errorf("no prefixes: err = %v, want ErrBadReplySubject", err)
	}
}

func sampleResult() chain.Result {
	return chain.Result{
		ID:       "r-9",
		Status:   chain.StatusOK,
		Content:  "it is sunny",
		Model:    "gpt-backup",
		Provider: "backup",
		Position: 1,
		Degraded: true,
		Attempts: []chain.Attempt{
			{Provider: "primary", Model: "gpt-4o", Outcome: chain.OutcomeFailed, Class: chain.ClassServer, StatusCode: 503, RetryAfterMs: 2000, LatencyMs: 12, Error: "503 Service Unavailable"},
			{Provider: "cheap", Model: "mini", Outcome: chain.OutcomeSkipped, Class: chain.ClassCooldown, Error: "cooling"},
			{Provider: "backup", Model: "gpt-backup", Outcome: chain.OutcomeOK, LatencyMs: 40},
		},
		Usage:      chain.Usage{PromptTokens: 10, CompletionTokens: 4},
		LatencyMs:  55,
		QueuedMs:   3,
		Deliveries: 2,
		Metadata:   chain.Metadata{"tenant": "acme"},
	}
}

func TestResultRoundTrip(t *testing.T) {
	want := sampleResult()
	failed := chain.Result{ID: "r-10", Status: chain.StatusFailed, Error: "every provider failed", Attempts: []chain.Attempt{
		{Provider: "primary", Outcome: chain.OutcomeFailed, Class: chain.ClassAuth, StatusCode: 401},
	}}
	for _, enc := range []wire.Encoding{wire.JSON, wire.MsgPack} {
		for _, res := range []chain.Result{want, failed} {
			t.Run(enc.ContentType()+"/"+res.ID, func(t *testing.T) {
				data, err := wire.EncodeResult(res, enc)
				if err != nil {
					t.Fatal(err)
				}
				for _, header := range []nats.Header{{}, hdr("Content-Type", enc.ContentType())} {
					got, err := wire.DecodeResult(data, header)
					if err != nil {
						t.Fatalf("DecodeResult: %v", err)
					}
					if !reflect.DeepEqual(got, res) {
						t.Errorf("round trip:\n got %+v\nwant %+v", got, res)
					}
				}
			})
		}
	}
}

// TestResultMsgpackGeneric checks what a client in another language sees: the
// class travels as a string, not as an int or binary text.
func TestResultMsgpackGeneric(t *testing.T) {
	data, err := wire.EncodeResult(sampleResult(), wire.MsgPack)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	attempts, ok := m["attempts"].([]any)
	if !ok || len(attempts) != 3 {
		t.Fatalf("attempts = %#v", m["attempts"])
	}
	for i, wantClass := range []string{"server", "cooldown"} {
		a, ok := attempts[i].(map[string]any)
		if !ok {
			t.Fatalf("attempts[%d] = %#v", i, attempts[i])
		}
		class, ok := a["class"].(string)
		if !ok || class != wantClass {
			t.Errorf("attempts[%d].class = %#v (%T), want string %q", i, a["class"], a["class"], wantClass)
		}
	}
	if last := attempts[2].(map[string]any); last["class"] != nil {
		t.Errorf("successful attempt has class %#v, want none", last["class"])
	}
	if m["status"] != "ok" || m["id"] != "r-9" || m["degraded"] != true {
		t.Errorf("top-level fields = %v", m)
	}

	jdata, err := wire.EncodeResult(sampleResult(), wire.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var jm map[string]any
	if err := json.Unmarshal(jdata, &jm); err != nil {
		t.Fatal(err)
	}
	if c := jm["attempts"].([]any)[0].(map[string]any)["class"]; c != "server" {
		t.Errorf("json attempts[0].class = %#v, want \"server\"", c)
	}
}

func TestDecodeResultErrors(t *testing.T) {
	if _, err := wire.DecodeResult([]byte(`{}`), hdr("Content-Type", "text/html")); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("unsupported content type: err = %v, want ErrBadRequest", err)
	}
	if _, err := wire.DecodeResult([]byte(`{"id":`), nats.Header{}); err == nil {
		t.Error("truncated JSON result decoded without error")
	}
	if _, err := wire.DecodeResult([]byte{0xc1}, nats.Header{}); err == nil {
		t.Error("garbage msgpack result decoded without error")
	}
}

// TestDecodeRequestHugeLengths guards against a msgpack header that claims
// billions of elements: the decoder must refuse it without allocating for
// them (the msgpack library sizes slices from the header before reading).
func TestDecodeRequestHugeLengths(t *testing.T) {
	minimal, err := msgpack.Marshal(wire.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string, value ...byte) []byte {
		b := append([]byte{0x82}, minimal[1:]...)
		b = append(b, byte(0xa0|len(name)))
		b = append(b, name...)
		return append(b, value...)
	}
	tests := map[string][]byte{
		"messages array32":  append(append([]byte{0x81, 0xa8}, "messages"...), 0xdd, 0xff, 0xff, 0xff, 0xff),
		"messages array16":  append(append([]byte{0x81, 0xa8}, "messages"...), 0xdc, 0xff, 0xff),
		"schema array32":    field("response_schema", 0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff),
		"schema map32":      field("response_schema", 0xdf, 0xff, 0xff, 0xff, 0xff),
		"metadata map32":    field("metadata", 0xdf, 0xff, 0xff, 0xff, 0xff),
		"id str32":          field("id", 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'),
		"id bin32":          field("id", 0xc6, 0xff, 0xff, 0xff, 0xff, 'x'),
		"ext32":             field("deadline", 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01),
		"top-level array32": {0xdd, 0xff, 0xff, 0xff, 0xff},
		"nested array32s":   field("response_schema", 0x81, 0xa1, 'a', 0xdd, 0x00, 0x00, 0x00, 0x08, 0xdd, 0x00, 0x00, 0x00, 0x07, 0xdd, 0x00, 0x00, 0x00, 0x06),
		"deep nesting":      field("response_schema", append([]byte{0x81, 0xa1, 'a'}, []byte(strings.Repeat("\x91", 100000)+"\xc0")...)...),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := wire.DecodeRequest(data, nats.Header{}, 1, prefixes)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("decoding %d bytes allocated %d MiB", len(data), grew>>20)
			}
		})
	}
}

// TestHeaderNamesAreCanonical: results set their headers straight into the
// map, which finds them by their canonical MIME form (nats.Header.Get).
func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, name := range []string{wire.HeaderContentType, wire.HeaderMsgID, wire.HeaderRequestID, wire.HeaderModel,
		wire.HeaderProvider, wire.HeaderDegraded, wire.HeaderStatus, wire.HeaderRequestSeq, wire.HeaderRequestTime, wire.HeaderCache} {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("header %q is not canonical (%q)", name, c)
		}
	}
}

// TestResultEncoderEncodesAsEncodeResult reuses one encoder for results of
// either format, a long one before short ones, and wants each byte for byte
// as EncodeResult gives it, whatever the encoder held before.
func TestResultEncoderEncodesAsEncodeResult(t *testing.T) {
	long := sampleResult()
	long.Content = strings.Repeat("<b>sunny</b> & warm ", 50) // HTML escaped, as by Marshal
	short := chain.Result{ID: "r-2", Status: chain.StatusFailed, Error: "expired"}
	var e wire.ResultEncoder
	for _, enc := range []wire.Encoding{wire.JSON, wire.MsgPack, wire.JSON} {
		for _, res := range []chain.Result{long, short, sampleResult(), {}} {
			want, err := wire.EncodeResult(res, enc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Encode(&res, enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s of %q:\ngot  %q\nwant %q", enc.ContentType(), res.ID, got, want)
			}
		}
	}
}
