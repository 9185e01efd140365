package deadletter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/wire"
)

// Bodies are outside input, often refused ones: the msgpack side is a
// walker that neither recurses nor allocates by declared lengths, so a
// hostile body cannot exhaust an operator's `processor dlq`.

// encUnknown stands for a body in a format the processor refuses.
const encUnknown wire.Encoding = -1

// detectEncoding is the body's format as the processor detects it.
func detectEncoding(data []byte, header nats.Header) wire.Encoding {
	enc, err := wire.DetectEncoding(data, header)
	if err != nil {
		return encUnknown
	}
	return enc
}

// bodyFields are the top-level fields the dead-letter tools read; empty when
// absent or unreadable.
type bodyFields struct {
	ID       string `json:"id"`
	Deadline string `json:"deadline"`
}

// readFields reads "id" and "deadline" from a body, best effort, matching
// keys as the processor's decoders do (JSON ignoring case, msgpack exactly;
// the last duplicate wins).
func readFields(data []byte, header nats.Header) bodyFields {
	var f bodyFields
	switch detectEncoding(data, header) {
	case wire.JSON:
		// A field of the wrong type is skipped; the others still decode.
		var typeErr *json.UnmarshalTypeError
		if err := json.Unmarshal(data, &f); err != nil && !errors.As(err, &typeErr) {
			return bodyFields{}
		}
	case wire.MsgPack:
		entries, err := msgpackwalk.MapEntries(data)
		if err != nil {
			return bodyFields{}
		}
		for _, e := range entries {
			val := data[e.ValStart:e.ValEnd]
			v, ok := msgpackwalk.String(val)
			switch {
			case !e.KeyIsString:
			case e.Key == "id" && ok:
				f.ID = v
			case e.Key == "deadline" && ok:
				f.Deadline = v
			case e.Key == "deadline" && msgpackwalk.IsTimestamp(val):
				// A deadline may be a msgpack timestamp (docs/requests.md).
				if t, err := wire.MsgpackDeadline(val); err == nil {
					f.Deadline = t
				}
			}
		}
	}
	return f
}

var errNotAnObject = errors.New("body is not a JSON object or msgpack map")

// setFields returns a copy of the body with the named top-level fields set
// to strings, in its own encoding, other fields as they were encoded. A
// JSON body comes back compacted with its keys sorted.
func setFields(data []byte, header nats.Header, set map[string]string) ([]byte, error) {
	switch detectEncoding(data, header) {
	case wire.JSON:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return nil, errNotAnObject
		}
		for name, v := range set {
			// Every spelling goes, as encoding/json ignores case.
			for k := range obj {
				if strings.EqualFold(k, name) {
					delete(obj, k)
				}
			}
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			obj[name] = raw
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(obj); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	case wire.MsgPack:
		entries, err := msgpackwalk.MapEntries(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotAnObject, err)
		}
		var kept []msgpackwalk.Entry
		for _, e := range entries {
			if _, replaced := set[e.Key]; e.KeyIsString && replaced {
				continue
			}
			kept = append(kept, e)
		}
		var out bytes.Buffer
		enc := msgpack.NewEncoder(&out)
		_ = enc.EncodeMapLen(len(kept) + len(set)) // a bytes.Buffer does not fail
		for _, e := range kept {
			out.Write(data[e.KeyStart:e.ValEnd])
		}
		for _, name := range slices.Sorted(maps.Keys(set)) {
			_ = enc.EncodeString(name)
			_ = enc.EncodeString(set[name])
		}
		return out.Bytes(), nil
	}
	return nil, errNotAnObject
}
