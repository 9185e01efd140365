package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// hostileRequest is a valid one-message request, for the tests below to spoil
// one field of.
func hostileRequest() wire.Request {
	return wire.Request{ID: "r1", Messages: []chain.Message{{Role: "user", Content: "hi"}}}
}

// TestDecodeRequestBoundsReplySubjects: a reply subject becomes the subject
// of a PUB line, so one the server would refuse (over its control-line limit)
// or read as a wildcard is refused at decode, from the body or the header.
func TestDecodeRequestBoundsReplySubjects(t *testing.T) {
	longest := "_INBOX." + strings.Repeat("a", wire.MaxReplySubjectLen-len("_INBOX."))
	mostTokens := "_INBOX" + strings.Repeat(".t", wire.MaxReplySubjectTokens-1)
	refused := map[string]string{
		"5000 bytes":                "_INBOX." + strings.Repeat("x", 5000),
		"one byte over the limit":   longest + "a",
		"one token over the limit":  mostTokens + ".t",
		"non-ASCII":                 "_INBOX.ü",
		"no-break space":            "_INBOX.a\u00a0b",
		"line separator":            "_INBOX.a\u2028b",
		"DEL":                       "_INBOX.a\x7f",
		"escape":                    "_INBOX.\x1b[2J",
		"NUL":                       "_INBOX.a\x00",
		"wildcard token in between": "_INBOX.*.a",
		"full wildcard in between":  "_INBOX.>.a",
		"empty token":               "_INBOX.a..b",
		"invalid UTF-8":             "_INBOX.\xff",
	}
	for name, subject := range refused {
		for _, via := range []string{"body", "header"} {
			t.Run(name+" via "+via, func(t *testing.T) {
				req := hostileRequest()
				header := nats.Header{}
				if via == "body" {
					req.ReplyTo = subject
				} else {
					header.Set(wire.HeaderReplyTo, subject)
				}
				body, err := msgpack.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				_, err = wire.DecodeRequest(body, header, 1, prefixes)
				want := wire.ErrBadReplySubject
				if name == "invalid UTF-8" && via == "body" {
					want = wire.ErrBadRequest // a msgpack str is UTF-8: the body itself is invalid
				}
				if !errors.Is(err, want) {
					t.Fatalf("err = %v, want %v", err, want)
				}
				if len(err.Error()) > 300 {
					t.Errorf("error text is %d bytes long; outside values must be cut: %.100s…", len(err.Error()), err)
				}
			})
		}
	}
	for _, subject := range []string{longest, mostTokens, "_INBOX.a*b.c>", "detour.results.r1"} {
		req := hostileRequest()
		req.ReplyTo = subject
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); err != nil || d.ReplyTo != subject {
			t.Errorf("reply subject %.40q (%d bytes) refused: %v", subject, len(subject), err)
		}
	}
}

// TestDecodeRequestBoundsIDs: an id becomes a subject token, a header value
// and a log field, so only printable, valid UTF-8 without spaces or invisible
// characters of any script is taken, from the body or Nats-Msg-Id.
func TestDecodeRequestBoundsIDs(t *testing.T) {
	refused := map[string]string{
		"no-break space":      "a\u00a0b",
		"ideographic space":   "a\u3000b",
		"next line":           "a\u0085b",
		"line separator":      "a\u2028b",
		"zero-width space":    "a\u200bb",
		"byte order mark":     "\ufeffa",
		"right-to-left mark":  "a\u200fb",
		"DEL":                 "a\x7f",
		"terminal escape":     "a\x1b[31m",
		"invalid UTF-8":       "a\xffb",
		"surrogate half":      "a\xed\xa0\x80",
		"too long multi-byte": strings.Repeat("é", 65),
	}
	for name, id := range refused {
		t.Run(name+" in the body", func(t *testing.T) {
			req := hostileRequest()
			req.ID = id
			body, err := msgpack.Marshal(req) // msgpack strings carry any bytes
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
		})
		t.Run(name+" in Nats-Msg-Id", func(t *testing.T) {
			req := hostileRequest()
			req.ID = ""
			body, err := msgpack.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wire.DecodeRequest(body, hdr(wire.HeaderMsgID, id), 1, prefixes); !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
		})
	}
	for _, id := range []string{"日本語-1", "ü", "a:b", "emoji-😀", "x" + strings.Repeat("é", 63)} {
		if err := wire.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
}

// TestDecodeRequestBoundsNumbers: temperature must be a finite number (msgpack
// carries NaN and infinities; a JSON number like 1e400 overflows) and
// max_tokens within reason, before any provider is asked.
func TestDecodeRequestBoundsNumbers(t *testing.T) {
	for name, v := range map[string]float64{"NaN": math.NaN(), "+Inf": math.Inf(1), "-Inf": math.Inf(-1)} {
		req := hostileRequest()
		req.Temperature = &v
		body, err := msgpack.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); !errors.Is(err, wire.ErrBadRequest) {
			t.Errorf("temperature %s: err = %v, want ErrBadRequest", name, err)
		}
	}
	for name, body := range map[string]string{
		"temperature 1e400":    `{"messages":[{"role":"user"}],"temperature":1e400}`,
		"max_tokens too large": `{"messages":[{"role":"user"}],"max_tokens":10000000000}`,
		"max_tokens 2^63":      `{"messages":[{"role":"user"}],"max_tokens":9223372036854775808}`,
	} {
		if _, err := wire.DecodeRequest([]byte(body), nats.Header{}, 1, prefixes); !errors.Is(err, wire.ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
	req := hostileRequest()
	req.MaxTokens = math.MaxInt64
	body, err := msgpack.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("msgpack max_tokens 2^63-1: err = %v, want ErrBadRequest", err)
	}
	ok := hostileRequest()
	ok.MaxTokens = wire.MaxMaxTokens
	if body, err = msgpack.Marshal(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes); err != nil {
		t.Errorf("max_tokens at the limit refused: %v", err)
	}
}

// nestedSchema is a response_schema of depth levels of {"items": …}.
func nestedSchema(depth int) map[string]any {
	s := map[string]any{}
	for range depth - 1 {
		s = map[string]any{"items": s}
	}
	return s
}

// TestDecodeRequestRefusesExpensiveSchemas is the acceptance of the
// "expensive input" half: a 90 KB nested response_schema, whose compilation
// would cost about the cube of its depth, is refused at decode within a second
// and without allocating much, in either encoding; so is a schema over the
// size limit.
func TestDecodeRequestRefusesExpensiveSchemas(t *testing.T) {
	// 9,990 levels: deep, but within encoding/json's own nesting limit, so
	// the decoder builds the whole value and the schema check must refuse it.
	deep := `{"messages":[{"role":"user"}],"response_schema":` +
		strings.Repeat(`{"items":`, 9990) + `{}` + strings.Repeat(`}`, 9990) + `}`
	deepMsgpack, err := msgpack.Marshal(wire.Request{Messages: []chain.Message{{Role: "user"}}, ResponseSchema: nestedSchema(9990)})
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]any{}
	for i := range 3000 {
		props[fmt.Sprintf("property-%d", i)] = map[string]any{"type": "string"}
	}
	wide, err := json.Marshal(wire.Request{Messages: []chain.Message{{Role: "user"}}, ResponseSchema: map[string]any{"properties": props}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string][]byte{"90 KB nested JSON": []byte(deep), "nested msgpack": deepMsgpack, "wide JSON over 64 KiB": wide}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes refused in %v, %d KiB allocated: %v", len(body), took, grew>>10, err)
			if took > time.Second {
				t.Errorf("refusing took %v, want under a second", took)
			}
			if grew > 50<<20 {
				t.Errorf("refusing allocated %d MiB, want under 50", grew>>20)
			}
		})
	}
	if len(deep) < 90_000 {
		t.Fatalf("the nested schema is %d bytes, want 90 KB", len(deep))
	}
}

// TestDecodeRequestNestedSchema checks that a schema as deep as the limit
// allows, in either encoding, still decodes, and one level more does not.
func TestDecodeRequestNestedSchema(t *testing.T) {
	schema := map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	for depth := 2; depth+2 <= chain.MaxSchemaDepth; depth += 2 {
		schema = map[string]any{"type": "object", "properties": map[string]any{"x": schema}, "enum": []any{1, "a", nil, true, 2.5}}
	}
	deeper := map[string]any{"items": schema}
	for _, enc := range []wire.Encoding{wire.JSON, wire.MsgPack} {
		for _, s := range []map[string]any{schema, deeper} {
			req := wire.Request{ID: "deep", Messages: []chain.Message{{Role: "user"}}, ResponseSchema: s}
			var data []byte
			var err error
			if enc == wire.JSON {
				data, err = json.Marshal(req)
			} else {
				data, err = msgpack.Marshal(req)
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := wire.DecodeRequest(data, nats.Header{}, 1, prefixes)
			if isDeeper := len(s) == 1; isDeeper {
				if !errors.Is(err, wire.ErrBadRequest) {
					t.Errorf("%s: schema one level too deep: err = %v, want ErrBadRequest", enc.ContentType(), err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", enc.ContentType(), err)
			}
			if got, want := normaliseSchema(t, d.ResponseSchema), normaliseSchema(t, schema); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: nested schema changed in decoding", enc.ContentType())
			}
		}
	}
}
