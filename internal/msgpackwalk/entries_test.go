package msgpackwalk

import (
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestMapEntries(t *testing.T) {
	// {"id":"x", 7:"y", "bin":<bin "b">, "id":"z"} and a trailing value.
	data := []byte{0x84, 0xa2, 'i', 'd', 0xa1, 'x', 0x07, 0xa1, 'y', 0xa3, 'b', 'i', 'n', 0xc4, 0x01, 'b', 0xc4, 0x02, 'i', 'd', 0xa1, 'z', 0xc0}
	entries, err := MapEntries(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key   string
		isStr bool
		value string
	}{{"id", true, "x"}, {"", false, "y"}, {"bin", true, "b"}, {"id", true, "z"}}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		v, ok := String(data[e.ValStart:e.ValEnd])
		if e.Key != want[i].key || e.KeyIsString != want[i].isStr || !ok || v != want[i].value {
			t.Errorf("entry %d = %+v (value %q), want %+v", i, e, v, want[i])
		}
	}
	for name, bad := range map[string][]byte{
		"array":          {0x91, 0x01},
		"nil":            {0xc0},
		"empty":          {},
		"map32 claims":   {0xdf, 0xff, 0xff, 0xff, 0xff},
		"cut after key":  {0x81, 0xa1, 'a'},
		"cut in a value": {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := MapEntries(bad); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "array" && !errors.Is(err, ErrNotMap) {
			t.Errorf("%s: err = %v, want ErrNotMap", name, err)
		}
	}
}

func TestElements(t *testing.T) {
	data := []byte{0x93, 0x01, 0x91, 0x02, 0xa1, 'x'}
	spans, err := Elements(data)
	if err != nil || len(spans) != 3 || spans[0] != [2]int{1, 2} || spans[1] != [2]int{2, 4} || spans[2] != [2]int{4, 6} {
		t.Fatalf("Elements = %v, %v", spans, err)
	}
	if _, err := Elements([]byte{0x81, 0x01, 0x02}); !errors.Is(err, ErrNotArray) {
		t.Errorf("a map: err = %v, want ErrNotArray", err)
	}
	if _, err := Elements([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}); err == nil {
		t.Error("array32 of nothing accepted")
	}
}

func TestKindAndTimestamp(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tm := range []time.Time{time.Unix(1, 0), time.Unix(1, 5), time.Unix(-1, 0)} {
		if b := enc(tm); !IsTimestamp(b) || Kind(b) != "a timestamp" {
			t.Errorf("%v encoded as % x: not a timestamp", tm, b)
		}
	}
	tests := map[string]any{
		"an integer": -3, "a number": 1.5, "a string": "s", "a list": []int{1}, "a map": map[string]int{},
		"null": nil, "a boolean": true, "binary data": []byte{1},
	}
	for want, v := range tests {
		if got := Kind(enc(v)); got != want {
			t.Errorf("Kind(%#v) = %q, want %q", v, got, want)
		}
	}
	if got := Kind([]byte{0xd4, 0x05, 0x00}); got != "a msgpack extension" {
		t.Errorf("Kind(ext 5) = %q", got)
	}
	if got := Kind([]byte{0xc1}); got != "an invalid msgpack value" {
		t.Errorf("Kind(0xc1) = %q", got)
	}
}
