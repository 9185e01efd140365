package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

func TestDecodeRequestCacheFields(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	for _, tt := range []struct {
		name string
		body []byte
	}{
		{"json", []byte(`{"messages":[{"role":"user","content":"hi"}],"cache_scope":"tenant-7","cache":{"no_cache":true,"no_store":true,"stale_if_error":30}}`)},
		{"msgpack", compactMsgpack(t, map[string]any{"messages": msgs, "cache_scope": "tenant-7",
			"cache": map[string]any{"no_cache": true, "no_store": true, "stale_if_error": 30}})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := wire.DecodeRequest(tt.body, nats.Header{}, 1, prefixes)
			if err != nil {
				t.Fatal(err)
			}
			req, err := d.ChainRequest(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			c := req.Cache
			if c.Scope != "tenant-7" || !c.NoCache || !c.NoStore || c.StaleIfError == nil || *c.StaleIfError != 30*time.Second || c.Fingerprint == nil || len(c.Fingerprint()) != 64 {
				t.Errorf("cache control %+v; want scope tenant-7, no_cache, no_store, stale_if_error 30s and a fingerprint", c)
			}
		})
	}
}

func TestDecodeRequestCacheDefaults(t *testing.T) {
	d, err := wire.DecodeRequest([]byte(`{"messages":[{"role":"user"}],"cache":{"stale_if_error":0}}`), nats.Header{}, 1, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := d.ChainRequest(t.Context(), nil)
	if req.Cache.Scope != wire.DefaultCacheScope || req.Cache.NoCache || req.Cache.NoStore || req.Cache.StaleIfError == nil || *req.Cache.StaleIfError != 0 {
		t.Errorf("cache control %+v; want scope shared, stale answers off", req.Cache)
	}
	d, _ = wire.DecodeRequest([]byte(`{"messages":[{"role":"user"}]}`), nats.Header{}, 1, prefixes)
	if req, _ := d.ChainRequest(t.Context(), nil); req.Cache.StaleIfError != nil {
		t.Errorf("stale_if_error = %v without a cache field, want nil (the chain's stale_ttl)", *req.Cache.StaleIfError)
	}
}

func TestDecodeRequestBadCacheFields(t *testing.T) {
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	mp := func(key string, v any) []byte {
		return compactMsgpack(t, map[string]any{"id": "c", "messages": msgs, key: v})
	}
	js := func(fields string) []byte { return []byte(`{"messages":[{"role":"user"}],` + fields + `}`) }
	for _, tt := range []struct {
		name string
		body []byte
		want string
	}{
		{"json not an object", js(`"cache":"yes"`), `cache must be an object such as {"no_store": true}, not the string "yes"`},
		{"json no_cache", js(`"cache":{"no_cache":"true"}`), `cache.no_cache must be true or false, not the string "true"`},
		{"json no_store", js(`"cache":{"no_store":1}`), `cache.no_store must be true or false, not "1"`},
		{"json stale_if_error fraction", js(`"cache":{"stale_if_error":1.5}`), `cache.stale_if_error must be a whole number of seconds from 0 to 1000000000, not "1.5"`},
		{"json stale_if_error negative", js(`"cache":{"stale_if_error":-1}`), `cache.stale_if_error must be a whole number of seconds`},
		{"json stale_if_error huge", js(`"cache":{"stale_if_error":1e30}`), `cache.stale_if_error must be a whole number of seconds`},
		{"json unknown key", js(`"cache":{"nocache":true}`), `cache has no key "nocache"; did you mean "no_cache"?`},
		{"json unrelated key", js(`"cache":{"ttl":5}`), `cache has no key "ttl" (it has no_cache, no_store and stale_if_error)`},
		{"json scope kind", js(`"cache_scope":7`), "cache_scope must be a string, not a number"},
		{"json scope dot", js(`"cache_scope":"a.b"`), `cache_scope "a.b" must be one token of at most 64 letters, digits, '-' or '_'`},
		{"json scope wildcard", js(`"cache_scope":"*"`), `cache_scope "*" must be one token`},
		{"json scope long", js(`"cache_scope":"` + strings.Repeat("x", 65) + `"`), `must be one token of at most 64`},
		{"msgpack not an object", mp("cache", []any{1}), "cache must be an object such as {\"no_store\": true}, not a list"},
		{"msgpack stale_if_error", mp("cache", map[string]any{"stale_if_error": "10"}), `cache.stale_if_error must be a whole number of seconds from 0 to 1000000000, not the string "10"`},
		{"msgpack stale_if_error float", mp("cache", map[string]any{"stale_if_error": 2.5}), `not "2.5"`},
		{"msgpack non-string keys", mp("cache", map[any]any{1: true}), "cache must be an object whose keys are strings"},
		{"msgpack nested non-string keys", mp("cache", map[string]any{"no_cache": map[any]any{1: true}}), "cache must be an object whose keys are strings"},
		{"msgpack unknown key", mp("cache", map[string]any{"no_stor": true}), `did you mean "no_store"?`},
		{"msgpack scope kind", mp("cache_scope", 3), "cache_scope must be a string, not an integer"},
		{"msgpack scope space", mp("cache_scope", "a b"), `cache_scope "a b" must be one token`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(tt.body, nats.Header{}, 1, prefixes)
			if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrBadRequest saying %q", err, tt.want)
			}
			for _, internal := range []string{"Go struct", "msgpack:", "code=", "wire.", "json:"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("err %q shows decoder internals (%q)", err, internal)
				}
			}
		})
	}
}

// TestFingerprintSeparatesWhatChangesTheAnswer: each field that changes the
// answer changes the fingerprint; the ones that do not leave it alone, and
// the two encodings agree.
func TestFingerprintSeparatesWhatChangesTheAnswer(t *testing.T) {
	base := func() wire.Request {
		temp := 0.5
		return wire.Request{ID: "a", Messages: []chain.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
			MaxTokens: 100, Temperature: &temp, ResponseSchema: map[string]any{"type": "object", "required": []any{"answer"}}}
	}
	fp := func(r wire.Request, enc wire.Encoding) string {
		t.Helper()
		var body []byte
		if enc == wire.JSON {
			body = mustJSON(t, r)
		} else {
			body = mustMsgpack(t, r)
		}
		d, err := wire.DecodeRequest(body, nats.Header{}, 1, prefixes)
		if err != nil {
			t.Fatal(err)
		}
		return d.Fingerprint()
	}
	want := fp(base(), wire.JSON)
	if got := fp(base(), wire.MsgPack); got != want {
		t.Errorf("msgpack fingerprint %s differs from JSON's %s", got, want)
	}
	same := base()
	same.ID, same.ReplyTo, same.Deadline, same.Metadata = "b", "_INBOX.x", "2030-01-01T00:00:00Z", chain.Metadata{"k": "v"}
	same.Cache, same.CacheScope = &wire.CacheControl{NoStore: true}, "other"
	if got := fp(same, wire.JSON); got != want {
		t.Error("id, reply_to, deadline, metadata, cache or cache_scope changed the fingerprint")
	}
	changes := map[string]func(*wire.Request){
		"temperature":     func(r *wire.Request) { v := 0.7; r.Temperature = &v },
		"no temperature":  func(r *wire.Request) { r.Temperature = nil },
		"max_tokens":      func(r *wire.Request) { r.MaxTokens = 101 },
		"system message":  func(r *wire.Request) { r.Messages[0].Content = "be long" },
		"role":            func(r *wire.Request) { r.Messages[1].Role = "assistant" },
		"response_schema": func(r *wire.Request) { r.ResponseSchema = map[string]any{"type": "object"} },
		"no schema":       func(r *wire.Request) { r.ResponseSchema = nil },
	}
	for name, change := range changes {
		r := base()
		change(&r)
		if got := fp(r, wire.JSON); got == want {
			t.Errorf("%s: fingerprint unchanged", name)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	data, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
