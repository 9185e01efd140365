package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// FuzzDecodeRequest feeds outside input to the request decoder. Whatever the
// body and headers, it must not panic or allocate without bound, and what it
// accepts must be safe to use as subjects.
func FuzzDecodeRequest(f *testing.F) {
	valid := fullRequest()
	jsonBody, err := json.Marshal(valid)
	if err != nil {
		f.Fatal(err)
	}
	mpBody, err := msgpack.Marshal(valid)
	if err != nil {
		f.Fatal(err)
	}
	minimal, err := msgpack.Marshal(wire.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		f.Fatal(err)
	}
	if minimal[0] != 0x81 {
		f.Fatalf("minimal request should be a one-entry msgpack map, starts with %#x", minimal[0])
	}
	// {"messages": <array32 of 2^32-1 elements>} with no elements following.
	hugeMessages := append([]byte{0x81, 0xa8}, "messages"...)
	hugeMessages = append(hugeMessages, 0xdd, 0xff, 0xff, 0xff, 0xff)
	// A valid request whose response_schema holds a huge array and a huge map.
	hugeSchema := append([]byte{0x82}, minimal[1:]...)
	hugeSchema = append(hugeSchema, 0xaf)
	hugeSchema = append(hugeSchema, "response_schema"...)
	hugeSchema = append(hugeSchema, 0x82, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xa1, 'b', 0xdf, 0xff, 0xff, 0xff, 0xff)
	// A huge string length and a huge metadata map.
	hugeString := append([]byte{0x81, 0xa2}, "id"...)
	hugeString = append(hugeString, 0xdb, 0xff, 0xff, 0xff, 0xff, 'x')
	hugeMap := append([]byte{0x81, 0xa8}, "metadata"...)
	hugeMap = append(hugeMap, 0xdf, 0xff, 0xff, 0xff, 0xff)

	seeds := []struct {
		body        []byte
		withCT, isJ bool
		msgID       string
		replyTo     string
		seq         uint64
	}{
		{body: jsonBody},
		{body: jsonBody, withCT: true, isJ: true},
		{body: mpBody},
		{body: mpBody, withCT: true},
		{body: minimal, msgID: "m-1", replyTo: "_INBOX.x.1", seq: 3},
		{body: minimal, msgID: "a.b"},
		{body: minimal, replyTo: "$JS.API.STREAM.DELETE.X"},
		{body: jsonBody, withCT: true},
		{body: mpBody, withCT: true, isJ: true},
		{body: []byte("\xc1 garbage \x00\xff")},
		{body: []byte("{not json")},
		{body: nil},
		{body: []byte(`{"messages":[{"role":"user"}],"response_schema":` + strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000) + `}`)},
		{body: []byte(`{"messages":[{"role":"user"}],"response_schema":{"a":` + strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000) + `}}`)},
		{body: []byte(strings.Repeat("\x91", 30000))},
		{body: hugeMessages},
		{body: hugeMessages, withCT: true},
		{body: hugeSchema},
		{body: hugeString},
		{body: hugeMap},
		{body: []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{body: []byte{0xdf, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, s := range seeds {
		f.Add(s.body, s.withCT, s.isJ, s.msgID, s.replyTo, s.seq)
	}
	for _, s := range hostileSeeds(f) {
		f.Add(s.body, false, false, s.msgID, s.replyTo, uint64(1))
	}
	// A deeply nested msgpack schema: {"messages":[...],"response_schema":{"a":[[[[...]]]]}}.
	deep := append([]byte{0x82}, minimal[1:]...)
	deep = append(deep, 0xaf)
	deep = append(deep, "response_schema"...)
	deep = append(deep, 0x81, 0xa1, 'a')
	deep = append(deep, []byte(strings.Repeat("\x91", 50000))...)
	deep = append(deep, 0xc0)
	f.Add(deep, false, false, "", "", uint64(0))
	// What nats.js sends: metadata of every JSON scalar, and a msgpack
	// timestamp as the deadline; and what no client should.
	f.Add([]byte(`{"id":"n","messages":[{"role":"user"}],"metadata":{"n":1,"ok":true,"f":1.5e3,"z":null,"s":"x"}}`), false, false, "", "", uint64(1))
	f.Add(compactMsgpack(f, map[string]any{"id": "t", "messages": []any{map[string]any{"role": "user"}},
		"deadline": time.Unix(1_900_000_000, 5), "metadata": map[string]any{"n": 1, "f": float32(0.5), "u": uint64(math.MaxUint64)}}), false, false, "", "", uint64(1))
	f.Add([]byte("hello there"), false, false, "m-1", "_INBOX.x", uint64(1))
	// Deadlines at the edges: the zero time, the most negative msgpack
	// timestamp, and a leap second.
	f.Add([]byte(`{"id":"z","messages":[{"role":"user"}],"deadline":"0001-01-01T00:00:00Z"}`), false, false, "", "", uint64(1))
	f.Add(compactMsgpack(f, map[string]any{"messages": []any{map[string]any{"role": "user"}}, "deadline": timestamp96(math.MinInt64, 0)}), false, false, "", "", uint64(1))
	f.Add([]byte(`{"messages":[{"role":"user"}],"deadline":"2016-12-31t23:59:60z"}`), false, false, "", "", uint64(1))
	// The cache controls: valid, of the wrong kinds, with an unknown key,
	// and a scope that is no key token.
	f.Add([]byte(`{"messages":[{"role":"user"}],"cache_scope":"t-1","cache":{"no_cache":true,"no_store":false,"stale_if_error":0}}`), false, false, "", "", uint64(1))
	f.Add([]byte(`{"messages":[{"role":"user"}],"cache":{"stale_if_error":1e400,"nocache":1},"cache_scope":"a.*"}`), false, false, "", "", uint64(1))
	f.Add(compactMsgpack(f, map[string]any{"messages": []any{map[string]any{"role": "user"}}, "cache_scope": "s",
		"cache": map[string]any{"stale_if_error": uint64(math.MaxUint64), "no_store": nil}}), false, false, "", "", uint64(1))
	f.Add(compactMsgpack(f, map[string]any{"messages": []any{map[string]any{"role": "user"}},
		"cache": map[any]any{1: true}}), false, false, "", "", uint64(1))
	f.Add([]byte(`{"id":"q","reply_to":"$JS.API.X","metadata":{"n":{}}}`), false, false, "", "", uint64(1))

	f.Fuzz(func(t *testing.T, body []byte, withCT, isJSON bool, msgID, replyTo string, seq uint64) {
		header := nats.Header{}
		if withCT {
			if isJSON {
				header.Set(wire.HeaderContentType, "application/json")
			} else {
				header.Set(wire.HeaderContentType, "application/msgpack")
			}
		}
		if msgID != "" {
			header.Set(wire.HeaderMsgID, msgID)
		}
		if replyTo != "" {
			header.Set(wire.HeaderReplyTo, replyTo)
		}
		d, err := wire.DecodeRequest(body, header, seq, prefixes)
		// Whatever the body, a failed result may only go to a valid id
		// and an allowed reply subject.
		addr, addrOK := wire.RefusedAddress(body, header, seq, prefixes)
		if addrOK {
			if err := wire.ValidateID(addr.ID); err != nil {
				t.Fatalf("refused request addressed to id %q: %v", addr.ID, err)
			}
			if addr.ReplyTo != wire.ResultSubject(addr.ID) {
				if err := wire.ValidateReplySubject(addr.ReplyTo, prefixes); err != nil || wire.IsResultSubject(addr.ReplyTo) {
					t.Fatalf("refused request addressed to reply subject %q: %v", addr.ReplyTo, err)
				}
			}
		}
		if err != nil {
			if !errors.Is(err, wire.ErrBadRequest) && !errors.Is(err, wire.ErrBadReplySubject) {
				t.Fatalf("error %v wraps neither ErrBadRequest nor ErrBadReplySubject", err)
			}
			return
		}
		// What a request is answered on does not depend on how its body
		// was read.
		if want := (wire.Address{ID: d.ID, ReplyTo: d.ReplyTo, Encoding: d.Encoding}); !addrOK || addr != want {
			t.Fatalf("RefusedAddress = %+v, %v; DecodeRequest read %+v", addr, addrOK, want)
		}
		checkMetadata(t, d.Metadata)
		if err := wire.ValidateID(d.ID); err != nil {
			t.Fatalf("accepted id %q: %v", d.ID, err)
		}
		if len(d.Messages) == 0 {
			t.Fatal("accepted a request without messages")
		}
		for i, m := range d.Messages {
			if m.Role == "" {
				t.Fatalf("accepted messages[%d] without a role", i)
			}
		}
		if d.ReplyTo != wire.ResultSubject(d.ID) {
			if err := wire.ValidateReplySubject(d.ReplyTo, prefixes); err != nil {
				t.Fatalf("accepted reply subject %q: %v", d.ReplyTo, err)
			}
		}
		if !utf8.ValidString(d.ReplyTo) || len(d.ReplyTo) > max(wire.MaxReplySubjectLen, len(wire.ResultSubject(d.ID))) {
			t.Fatalf("accepted reply subject %q of %d bytes", d.ReplyTo, len(d.ReplyTo))
		}
		if d.MaxTokens < 0 || d.MaxTokens > wire.MaxMaxTokens {
			t.Fatalf("accepted max_tokens %d", d.MaxTokens)
		}
		if tp := d.Temperature; tp != nil && (math.IsNaN(*tp) || math.IsInf(*tp, 0) || *tp < 0) {
			t.Fatalf("accepted temperature %v", *tp)
		}
		if d.ResponseSchema != nil {
			if err := chain.CheckSchema(d.ResponseSchema); err != nil {
				t.Fatalf("accepted a response_schema outside the limits: %v", err)
			}
		}
		if d.Deadline != "" {
			// The deadline kept is RFC 3339 text of the instant read, a
			// msgpack timestamp's too; the zero time is a deadline like any.
			again, err := wire.DecodeRequest(deadlineJSON(t, d.Deadline), nats.Header{}, 1, prefixes)
			if err != nil || !again.DeadlineAt.Equal(d.DeadlineAt) {
				t.Fatalf("deadline %q read as %v, but as %v (%v) in JSON", d.Deadline, d.DeadlineAt, again.DeadlineAt, err)
			}
		}
		if withCT {
			want := wire.MsgPack
			if isJSON {
				want = wire.JSON
			}
			if d.Encoding != want {
				t.Fatalf("encoding %v, Content-Type said %v", d.Encoding, want)
			}
		}
	})
}

// checkMetadata fails t unless m holds only JSON scalars within the bounds
// of docs/requests.md.
func checkMetadata(t *testing.T, m chain.Metadata) {
	t.Helper()
	if len(m) > wire.MaxMetadataKeys {
		t.Fatalf("accepted %d metadata keys", len(m))
	}
	for k, v := range m {
		if len(k) > wire.MaxMetadataKeyLen {
			t.Fatalf("accepted a metadata key of %d bytes", len(k))
		}
		switch v := v.(type) {
		case nil, bool, int64, uint64:
		case string:
			if len(v) > wire.MaxMetadataValueLen {
				t.Fatalf("accepted a metadata value of %d bytes", len(v))
			}
		case json.Number:
			if f, err := v.Float64(); err != nil || math.IsInf(f, 0) || len(v) > wire.MaxMetadataValueLen {
				t.Fatalf("accepted metadata number %q", v)
			}
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("accepted metadata number %v", v)
			}
		case float32:
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("accepted metadata number %v", v)
			}
		default:
			t.Fatalf("accepted metadata[%q] of type %T", k, v)
		}
	}
}

// hostileSeed is a request body with the headers that carry outside values.
type hostileSeed struct {
	body           []byte
	msgID, replyTo string
}

// hostileSeeds are requests each of which, taken as it came, would knock a
// processor off NATS, spoil a subject, header or log line, or cost far more
// than its size.
func hostileSeeds(f *testing.F) []hostileSeed {
	f.Helper()
	mp := func(r wire.Request) []byte {
		b, err := msgpack.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	base := func() wire.Request {
		return wire.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}}
	}
	longReply := "_INBOX." + strings.Repeat("x", 5000)
	withReply := base()
	withReply.ReplyTo = longReply
	badID := base()
	badID.ID = "a\xffb\u200b"
	nan, inf := math.NaN(), math.Inf(1)
	withNaN, withInf := base(), base()
	withNaN.Temperature, withInf.Temperature = &nan, &inf
	hugeTokens := base()
	hugeTokens.MaxTokens = math.MaxInt64
	nested := `{"messages":[{"role":"user"}],"response_schema":` +
		strings.Repeat(`{"items":`, 9990) + `{}` + strings.Repeat(`}`, 9990) + `}`
	return []hostileSeed{
		{body: mp(withReply)},
		{body: mp(base()), replyTo: longReply},
		{body: mp(base()), replyTo: "_INBOX.a\u00a0b"},
		{body: mp(base()), msgID: "id\u3000with\u2028spaces"},
		{body: mp(base()), msgID: "\x1b[31mred"},
		{body: mp(badID)},
		{body: mp(withNaN)},
		{body: mp(withInf)},
		{body: mp(hugeTokens)},
		{body: []byte(`{"messages":[{"role":"user"}],"temperature":1e400}`)},
		{body: []byte(`{"messages":[{"role":"user"}],"max_tokens":10000000000}`)},
		{body: []byte(nested)},
	}
}

// fuzzEncoder is reused across FuzzDecodeResult's inputs.
var fuzzEncoder wire.ResultEncoder

// FuzzDecodeResult feeds outside input to the result decoder, which clients
// (the publisher, status tools) run on whatever arrives on a reply subject:
// it must not panic, and a result it encodes must decode to the same result.
func FuzzDecodeResult(f *testing.F) {
	res := sampleResult()
	for _, enc := range []wire.Encoding{wire.JSON, wire.MsgPack} {
		data, err := wire.EncodeResult(res, enc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, enc.ContentType())
		f.Add(data, "")
	}
	f.Add([]byte(`{"status":"ok","attempts":[{"class":"nope"}]}`), "application/json")
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "")
	f.Add([]byte(`{"status":`), "text/plain")
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		header := nats.Header{}
		if contentType != "" {
			header.Set(wire.HeaderContentType, contentType)
		}
		got, err := wire.DecodeResult(data, header)
		if err != nil {
			return
		}
		enc, err := wire.DetectEncoding(data, header)
		if err != nil {
			t.Fatalf("decoded a result whose encoding was refused: %v", err)
		}
		again, err := wire.EncodeResult(got, enc)
		if err != nil {
			return // a decoded float such as NaN has no JSON form
		}
		// The processor's reused encoder, which has encoded the inputs
		// before this one, must give the same bytes.
		if reused, err := fuzzEncoder.Encode(&got, enc); err != nil || !bytes.Equal(reused, again) {
			t.Fatalf("a reused ResultEncoder gives %q (%v), EncodeResult %q", reused, err, again)
		}
		header = nats.Header{wire.HeaderContentType: {enc.ContentType()}}
		back, err := wire.DecodeResult(again, header)
		if err != nil {
			t.Fatalf("a result re-encoded as %s does not decode: %v", enc.ContentType(), err)
		}
		// One round normalises (invalid UTF-8, empty lists); a second must
		// change nothing.
		third, err := wire.EncodeResult(back, enc)
		if err != nil {
			t.Fatal(err)
		}
		if again2, err := wire.DecodeResult(third, header); err != nil || !reflect.DeepEqual(back, again2) {
			t.Fatalf("round trip changed the result (%v):\n%+v\n%+v", err, back, again2)
		}
	})
}
