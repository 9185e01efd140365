package wire

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestCheckMsgpackAcceptsValid makes sure the pre-decoding check refuses
// nothing the msgpack encoder writes, in every size class of every type.
func TestCheckMsgpackAcceptsValid(t *testing.T) {
	manyInts := make([]int, 70000)
	manyKeys := map[string]int{}
	for i := range 17 {
		manyKeys[strings.Repeat("k", i+1)] = i
	}
	bigMap := map[string]bool{}
	for i := range 70000 {
		bigMap[string(rune(0x4e00+i%20000))+strings.Repeat("x", i/20000)] = true
	}
	values := []any{
		nil, true, false,
		0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxInt32, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt64,
		uint64(math.MaxUint64), float32(1.5), 2.25, math.Inf(1),
		"", "a", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 255),
		strings.Repeat("s", 256), strings.Repeat("s", 65535), strings.Repeat("s", 65536),
		[]byte{}, []byte("bin"), make([]byte, 300), make([]byte, 70000),
		time.Unix(1, 0), time.Unix(1<<33, 5), time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC),
		[]any{}, []any{1, "a", nil, []any{[]any{}}}, manyInts[:15], manyInts[:16], manyInts,
		map[string]any{}, map[string]any{"a": map[string]any{"b": []any{1}}}, manyKeys, bigMap,
	}
	for i, v := range values {
		data, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatalf("values[%d]: %v", i, err)
		}
		if err := checkMsgpack(data); err != nil {
			t.Errorf("values[%d] (%T, %d bytes, code %#x): %v", i, v, len(data), data[0], err)
		}
	}
}

func TestCheckMsgpackRefuses(t *testing.T) {
	tests := map[string]string{
		"empty":          "",
		"never used":     "\xc1",
		"short str":      "\xa3ab",
		"short str8":     "\xd9\x05abc",
		"short length":   "\xda\x01",
		"short int":      "\xcd\x01",
		"short float64":  "\xcb\x00\x00\x00",
		"short fixext":   "\xd8\x01abc",
		"short array":    "\x93\x01\x02",
		"short map":      "\x82\xa1a\x01\xa1b",
		"array32 claim":  "\xdd\xff\xff\xff\xff\x01",
		"map32 claim":    "\xdf\x80\x00\x00\x00\x01\x01",
		"map16 claim":    "\xde\x00\x02\x01\x01\x01",
		"bin32 claim":    "\xc6\xff\xff\xff\xff",
		"ext32 claim":    "\xc9\x7f\xff\xff\xff\x01",
		"too deep":       strings.Repeat("\x91", maxMsgpackDepth+1) + "\xc0",
		"nested claim":   "\x91\xdd\x00\x00\x01\x00\xc0",
		"truncated deep": strings.Repeat("\x91", 100),
	}
	for name, data := range tests {
		if err := checkMsgpack([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkMsgpack([]byte(strings.Repeat("\x91", maxMsgpackDepth-1) + "\xc0")); err != nil {
		t.Errorf("nesting within the limit refused: %v", err)
	}
}
