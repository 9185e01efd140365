package cache_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cache"
)

// validEntryJSON is a valid stored value.
const validEntryJSON = `{"v":1,"created_at":"2026-12-01T10:00:00Z","fresh_until":"2026-12-01T10:10:00Z",` +
	`"stale_until":"2026-12-02T10:10:00Z","provider":"primary","model":"gpt-4o","content":"Hello!",` +
	`"usage":{"prompt_tokens":4,"completion_tokens":6}}`

// withField is validEntryJSON with one field replaced by a raw JSON value.
func withField(t testing.TB, field, raw string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validEntryJSON), &m); err != nil {
		t.Fatal(err)
	}
	m[field] = json.RawMessage(raw)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invalidEntries are stored values that must never be served, by what
// is wrong with them.
func invalidEntries(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"not json":               []byte(`{"v":1,`),
		"empty content":          withField(t, "content", `""`),
		"blank content":          withField(t, "content", `" \n\t"`),
		"no provider":            withField(t, "provider", `""`),
		"no model":               withField(t, "model", `""`),
		"long provider":          withField(t, "provider", `"`+strings.Repeat("p", 257)+`"`),
		"negative prompt tokens": withField(t, "usage", `{"prompt_tokens":-1,"completion_tokens":6}`),
		"negative completion":    withField(t, "usage", `{"prompt_tokens":4,"completion_tokens":-6}`),
		"stale before fresh":     withField(t, "stale_until", `"2026-12-01T10:05:00Z"`),
		"fresh before created":   withField(t, "fresh_until", `"2026-12-01T09:59:59Z"`),
		"no created_at":          withField(t, "created_at", `"0001-01-01T00:00:00Z"`),
		"absurd stale_until":     withField(t, "stale_until", `"9999-12-31T23:59:59Z"`),
	}
}

func TestDecodeEntryAcceptsAValidEntry(t *testing.T) {
	e, err := cache.DecodeEntry([]byte(validEntryJSON))
	if err != nil || e.Content != "Hello!" || e.Provider != "primary" || e.Usage.CompletionTokens != 6 ||
		!e.StaleUntil.Equal(time.Date(2026, 12, 2, 10, 10, 0, 0, time.UTC)) {
		t.Fatalf("DecodeEntry = %+v, %v; want the entry", e, err)
	}
}

func TestDecodeEntryRefusesInvalidEntries(t *testing.T) {
	for name, data := range invalidEntries(t) {
		if e, err := cache.DecodeEntry(data); !errors.Is(err, cache.ErrInvalidEntry) {
			t.Errorf("%s: DecodeEntry(%s) = %+v, %v; want ErrInvalidEntry", name, data, e, err)
		}
	}
}

// FuzzDecodeEntry: DecodeEntry never panics, and what it accepts keeps
// the rules of a valid entry and survives encoding and decoding again.
func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(validEntryJSON))
	for _, data := range invalidEntries(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := cache.DecodeEntry(data)
		if err != nil {
			return
		}
		if strings.TrimSpace(e.Content) == "" || e.Provider == "" || e.Model == "" ||
			e.Usage.PromptTokens < 0 || e.Usage.CompletionTokens < 0 ||
			e.FreshUntil.Before(e.CreatedAt) || e.StaleUntil.Before(e.FreshUntil) || e.V != cache.EntryVersion {
			t.Fatalf("DecodeEntry accepted %+v from %q", e, data)
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("encoding %+v: %v", e, err)
		}
		e2, err := cache.DecodeEntry(again)
		if err != nil || e2.Content != e.Content || !e2.StaleUntil.Equal(e.StaleUntil) || e2.Usage != e.Usage {
			t.Fatalf("round trip of %+v = %+v, %v", e, e2, err)
		}
	})
}
