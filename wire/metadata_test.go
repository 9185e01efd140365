package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/wire"
)

// compactMsgpack encodes v as most msgpack libraries do (nats.js's
// @msgpack/msgpack among them): integers in their shortest form, map keys
// sorted.
func compactMsgpack(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// msgpackField returns the bytes of a top-level field of a msgpack map.
func msgpackField(t testing.TB, data []byte, key string) []byte {
	t.Helper()
	entries, err := msgpackwalk.MapEntries(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Key == key {
			return data[e.ValStart:e.ValEnd]
		}
	}
	t.Fatalf("no field %q", key)
	return nil
}

// TestMetadataJSONScalarsEchoedAsSent: every JSON scalar is accepted in
// metadata, and a result echoes each one with the same text: a number stays
// a number, written as it was sent.
func TestMetadataJSONScalarsEchoedAsSent(t *testing.T) {
	const metadata = `{"big":12345678901234567890,"e":1e3,"f":1.50,"n":1,"neg":-7,"no":false,"none":null,"ok":true,"s":"acme"}`
	body := `{"id":"m-1","messages":[{"role":"user","content":"hi"}],"metadata":` + metadata + `}`
	d, err := wire.DecodeRequest([]byte(body), nats.Header{}, 1, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	want := chain.Metadata{"big": json.Number("12345678901234567890"), "e": json.Number("1e3"), "f": json.Number("1.50"),
		"n": json.Number("1"), "neg": json.Number("-7"), "no": false, "none": nil, "ok": true, "s": "acme"}
	if !reflect.DeepEqual(d.Metadata, want) {
		t.Fatalf("Metadata = %#v\nwant %#v", d.Metadata, want)
	}
	data, err := wire.EncodeResult(chain.Result{ID: d.ID, Status: chain.StatusOK, Metadata: d.Metadata}, wire.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"metadata":`+metadata)) {
		t.Fatalf("result %s does not echo the metadata %s", data, metadata)
	}
	back, err := wire.DecodeResult(data, nats.Header{})
	if err != nil || !reflect.DeepEqual(back.Metadata, want) {
		t.Fatalf("decoded result metadata = %#v, %v; want %#v", back.Metadata, err, want)
	}
	// A msgpack result of JSON metadata carries numbers as numbers.
	mp, err := wire.EncodeResult(back, wire.MsgPack)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := msgpack.Unmarshal(msgpackField(t, mp, "metadata"), &generic); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"n": int8(1), "neg": int8(-7), "f": 1.5, "e": 1000.0, "big": uint64(12345678901234567890), "s": "acme"} {
		if got := generic[k]; got != want {
			t.Errorf("msgpack metadata[%q] = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
}

// TestMetadataMsgpackScalarsEchoedAsSent: msgpack metadata comes back in the
// result byte for byte, as a client library encodes it: integers stay
// integers of the same width, a float32 stays a float32.
func TestMetadataMsgpackScalarsEchoedAsSent(t *testing.T) {
	metadata := map[string]any{
		"a": 1, "b": -5, "c": 300, "d": int64(-1) << 40, "e": uint64(math.MaxUint64),
		"f": float32(1.5), "g": 2.25, "h": true, "i": nil, "j": "acme", "k": "",
	}
	body := compactMsgpack(t, map[string]any{
		"id": "m-2", "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "metadata": metadata,
	})
	d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	want := chain.Metadata{"a": int64(1), "b": int64(-5), "c": int64(300), "d": int64(-1) << 40, "e": uint64(math.MaxUint64),
		"f": float32(1.5), "g": 2.25, "h": true, "i": nil, "j": "acme", "k": ""}
	if !reflect.DeepEqual(d.Metadata, want) {
		t.Fatalf("Metadata = %#v\nwant %#v", d.Metadata, want)
	}
	data, err := wire.EncodeResult(chain.Result{ID: d.ID, Status: chain.StatusOK, Metadata: d.Metadata}, wire.MsgPack)
	if err != nil {
		t.Fatal(err)
	}
	sent, echoed := msgpackField(t, body, "metadata"), msgpackField(t, data, "metadata")
	if !bytes.Equal(sent, echoed) {
		t.Fatalf("metadata echoed as % x\nsent as % x", echoed, sent)
	}
	back, err := wire.DecodeResult(data, nats.Header{})
	if err != nil || !reflect.DeepEqual(back.Metadata, want) {
		t.Fatalf("decoded result metadata = %#v, %v; want %#v", back.Metadata, err, want)
	}
	// A Go client may set any Go number.
	res := chain.Result{ID: "x", Metadata: chain.Metadata{"int": 3, "u8": uint8(4), "f": 0.5}}
	for _, enc := range []wire.Encoding{wire.JSON, wire.MsgPack} {
		data, err := wire.EncodeResult(res, enc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := wire.DecodeResult(data, nats.Header{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%v %v %v", back.Metadata["int"], back.Metadata["u8"], back.Metadata["f"]); got != "3 4 0.5" {
			t.Errorf("%s: Go numbers came back as %s", enc.ContentType(), got)
		}
	}
}

// TestMetadataRefused: values that are not JSON scalars, and metadata past
// its bounds, are bad requests whose error names the key and says why.
func TestMetadataRefused(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	mp := func(metadata any) []byte {
		return compactMsgpack(t, map[string]any{"id": "m", "messages": msgs, "metadata": metadata})
	}
	js := func(metadata string) []byte {
		return []byte(`{"id":"m","messages":[{"role":"user","content":"hi"}],"metadata":` + metadata + `}`)
	}
	many := map[string]any{}
	for i := range wire.MaxMetadataKeys + 1 {
		many[fmt.Sprint("k", i)] = i
	}
	manyJSON, _ := json.Marshal(many)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"json object value", js(`{"n":{"m":1}}`), `metadata["n"] is an object; a metadata value must be a string, a number, true, false or null`},
		{"json list value", js(`{"n":[1]}`), `metadata["n"] is a list`},
		{"json not an object", js(`"acme"`), "metadata must be an object, not a string"},
		{"json list", js(`[1]`), "metadata must be an object, not a list"},
		{"json number out of range", js(`{"n":1e400}`), `metadata["n"] must be a finite number`},
		{"json long value", js(`{"s":"` + strings.Repeat("x", wire.MaxMetadataValueLen+1) + `"}`), `metadata["s"] is longer than 4096 bytes`},
		{"json long key", js(`{"` + strings.Repeat("k", wire.MaxMetadataKeyLen+1) + `":1}`), "metadata key"},
		{"json too many keys", js(string(manyJSON)), "metadata has 65 keys, over the limit of 64"},
		{"msgpack map value", mp(map[string]any{"n": map[string]any{"m": 1}}), `metadata["n"] is a map`},
		{"msgpack list value", mp(map[string]any{"n": []int{1}}), `metadata["n"] is a list`},
		{"msgpack binary value", mp(map[string]any{"n": []byte{1, 2}}), `metadata["n"] is binary data`},
		{"msgpack timestamp value", mp(map[string]any{"at": time.Unix(1, 0)}), `metadata["at"] is a timestamp`},
		{"msgpack NaN", mp(map[string]any{"n": math.NaN()}), `metadata["n"] must be a finite number`},
		{"msgpack infinity", mp(map[string]any{"n": float32(math.Inf(-1))}), `metadata["n"] must be a finite number`},
		{"msgpack not a map", mp("acme"), "metadata is a string; it must be a map"},
		{"msgpack integer key", mp(map[int]any{1: "x"}), "metadata has a key that is an integer; keys must be strings"},
		{"msgpack too many keys", mp(many), "metadata has 65 keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(tt.body, nats.Header{}, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to say %q", err, tt.want)
			}
		})
	}
}
