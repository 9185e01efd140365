package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/internal/text"
)

// Metadata is a request's metadata, echoed unchanged in its result: string
// keys, each value a JSON scalar (a string, a number, true, false or null).
//
// Numbers keep their form across a round trip: a JSON number decodes as a
// json.Number, written back as its text; a msgpack integer as an int64 (a
// uint64 above math.MaxInt64), a float as a float32 or float64, each
// written back as the same kind. A Go program may set any Go integer or
// float. Any other kind of value is refused when decoding. The wire format
// bounds the keys and values.
type Metadata map[string]any

// metadataKeyQuote is how much of a key an error quotes, in bytes.
const metadataKeyQuote = 64

// metadataValueError says that the value of key is of a refused kind.
func metadataValueError(key, kind string) error {
	return fmt.Errorf("metadata[%s] is %s; a metadata value must be a string, a number, true, false or null",
		strconv.Quote(text.Cut(key, metadataKeyQuote)), kind)
}

// UnmarshalJSON reads a JSON object of scalars, numbers as json.Number; a
// value that is not an object is a *json.UnmarshalTypeError.
func (m *Metadata) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any // nil for null
	if err := dec.Decode(&obj); err != nil {
		if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			typeErr.Type = reflect.TypeFor[Metadata]()
		}
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		switch obj[k].(type) {
		case map[string]any:
			return metadataValueError(k, "an object")
		case []any:
			return metadataValueError(k, "a list")
		}
	}
	*m = obj
	return nil
}

// EncodeMsgpack writes the map with its keys sorted, json.Number values as
// msgpack numbers (an integer when the text is one), and integers in their
// shortest form.
func (m Metadata) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := encodeMetadataValue(enc, m[k]); err != nil {
			return fmt.Errorf("metadata[%s]: %w", strconv.Quote(text.Cut(k, metadataKeyQuote)), err)
		}
	}
	return nil
}

func encodeMetadataValue(enc *msgpack.Encoder, v any) error {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return enc.EncodeInt(i)
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return enc.EncodeUint(u)
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", string(v))
		}
		return enc.EncodeFloat64(f)
	case float32:
		return enc.EncodeFloat32(v)
	case float64:
		return enc.EncodeFloat64(v)
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return enc.EncodeInt(rv.Int()) // shortest form, as enc.Encode would not
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return enc.EncodeUint(rv.Uint())
	}
	return enc.Encode(v)
}

// DecodeMsgpack reads a msgpack map of scalars with string keys.
func (m *Metadata) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return err
	}
	if msgpackwalk.IsNil(raw) {
		*m = nil
		return nil
	}
	entries, err := msgpackwalk.MapEntries(raw)
	if err != nil {
		if errors.Is(err, msgpackwalk.ErrNotMap) {
			return fmt.Errorf("metadata is %s; it must be a map", msgpackwalk.Kind(raw))
		}
		return err
	}
	out := make(Metadata, len(entries))
	for _, e := range entries {
		if !e.KeyIsString {
			return fmt.Errorf("metadata has a key that is %s; keys must be strings", msgpackwalk.Kind(raw[e.KeyStart:e.ValStart]))
		}
		if !utf8.ValidString(e.Key) { // a bin key passes as a string
			return fmt.Errorf("metadata has a key of bytes that are not UTF-8; keys must be strings")
		}
		v, ok := decodeMetadataValue(raw[e.ValStart:e.ValEnd])
		if !ok {
			return metadataValueError(e.Key, msgpackwalk.Kind(raw[e.ValStart:e.ValEnd]))
		}
		out[e.Key] = v
	}
	*m = out
	return nil
}

// decodeMetadataValue decodes one msgpack scalar; false for another value.
func decodeMetadataValue(b []byte) (any, bool) {
	switch c := b[0]; {
	case c == 0xc0:
		return nil, true
	case c == 0xc2, c == 0xc3:
		return c == 0xc3, true
	case c == 0xcf: // uint64: the one integer that may not fit an int64
		var u uint64
		err := msgpack.Unmarshal(b, &u)
		if err == nil && u <= math.MaxInt64 {
			return int64(u), true
		}
		return u, err == nil
	case c <= 0x7f, c >= 0xe0, c >= 0xcc && c <= 0xd3:
		return unmarshalAs[int64](b)
	case c == 0xca:
		return unmarshalAs[float32](b)
	case c == 0xcb:
		return unmarshalAs[float64](b)
	case c >= 0xa0 && c <= 0xbf, c >= 0xd9 && c <= 0xdb:
		return msgpackwalk.String(b)
	}
	return nil, false
}

func unmarshalAs[T any](b []byte) (any, bool) {
	var v T
	err := msgpack.Unmarshal(b, &v)
	return v, err == nil
}
