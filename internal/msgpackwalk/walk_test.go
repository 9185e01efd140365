package msgpackwalk

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestValueEndAndCheck(t *testing.T) {
	value, err := msgpack.Marshal(map[string]any{"id": "x", "messages": []any{map[string]any{"role": "user"}}, "n": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	data := append(append([]byte{}, value...), 0xc0) // a trailing value
	if end, err := ValueEnd(data, 0); err != nil || end != len(value) {
		t.Fatalf("ValueEnd = %d, %v; want %d", end, err, len(value))
	}
	if err := Check(data, 10); err != nil {
		t.Fatalf("Check refused a well-formed value: %v", err)
	}
	for name, bad := range map[string][]byte{
		"truncated":      value[:len(value)-1],
		"array32 claims": {0xdd, 0xff, 0xff, 0xff, 0xff},
		"unused code":    {0xc1},
		"too deep":       {0x91, 0x91, 0x91, 0xc0},
	} {
		if err := Check(bad, 2); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ValueEnd(value[:3], 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("ValueEnd of a cut value: %v, want ErrTruncated", err)
	}
}
