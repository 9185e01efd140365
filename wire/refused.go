package wire

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/internal/msgpackwalk"
)

// Address is where the result of one request goes.
type Address struct {
	// ID is the request's id, a valid one (ValidateID).
	ID string
	// ReplyTo is the request's reply subject when it is allowed, else
	// ResultSubject(ID): never a subject a request may not name.
	ReplyTo string
	// Encoding is the result's encoding.
	Encoding Encoding
}

// RefusedAddress says where the failed result of a request refused on
// arrival goes (docs/results.md, Refused requests), reading the body's "id"
// and "reply_to" as DecodeRequest would, whatever else is wrong with it, at
// a cost bounded by its size. ok is false when the id is not valid or the
// body's is no string; a reply subject not allowed gives way to the own
// result subject. The encoding is RefusedEncoding's.
func RefusedAddress(data []byte, header nats.Header, seq uint64, replyPrefixes []string) (a Address, ok bool) {
	enc, f := refusedEncoding(data, header)
	id := RequestID(f.id, header.Get(HeaderMsgID), seq)
	if f.badID || ValidateID(id) != nil {
		return Address{}, false
	}
	a = Address{ID: id, ReplyTo: ResultSubject(id), Encoding: enc}
	// A reply_to that is no string names no reply subject, not even the header's.
	if s, err := replySubject(id, cmp.Or(f.replyTo, header.Get(HeaderReplyTo)), replyPrefixes); err == nil && !f.badReplyTo {
		a.ReplyTo = s
	}
	return a, true
}

// RefusedEncoding is the encoding of a refused request's failed result:
// the one its Content-Type names, else the one its body reads as; JSON for
// a body that is neither JSON nor msgpack, or of another Content-Type.
func RefusedEncoding(data []byte, header nats.Header) Encoding {
	enc, _ := refusedEncoding(data, header)
	return enc
}

func refusedEncoding(data []byte, header nats.Header) (Encoding, envelope) {
	enc, err := DetectEncoding(data, header)
	declared := err == nil && header.Get(HeaderContentType) != ""
	if err != nil { // an unsupported Content-Type: read the body as if it had none
		enc, _ = DetectEncoding(data, nil)
	}
	var f envelope
	switch enc {
	case JSON:
		f = readJSONEnvelope(data)
	case MsgPack:
		f = readMsgpackEnvelope(data)
	}
	if err != nil || (enc == MsgPack && !f.readable && !declared) {
		enc = JSON
	}
	return enc, f
}

// envelope is what RefusedAddress reads from a body.
type envelope struct {
	readable bool // a JSON object or a msgpack map
	// id and replyTo are "" when absent or null; badID and badReplyTo say
	// one is there but is no string.
	id, replyTo       string
	badID, badReplyTo bool
}

// readJSONEnvelope reads "id" and "reply_to" from a JSON object, matching
// keys as encoding/json does.
func readJSONEnvelope(data []byte) envelope {
	var raw struct {
		ID      json.RawMessage `json:"id"`
		ReplyTo json.RawMessage `json:"reply_to"`
	}
	if json.Unmarshal(data, &raw) != nil {
		return envelope{}
	}
	f := envelope{readable: true}
	f.id, f.badID = jsonString(raw.ID)
	f.replyTo, f.badReplyTo = jsonString(raw.ReplyTo)
	// An id given as "" names no result; one left out or null falls back.
	f.badID = f.badID || (f.id == "" && len(raw.ID) > 0 && !bytes.Equal(raw.ID, []byte("null")))
	// The id read as U+FFFD would be another, maybe another request's.
	f.badID = f.badID || CheckJSONText(raw.ID, "id") != nil
	return f
}

// jsonString decodes a JSON string, absent and null as ""; bad for another kind.
func jsonString(raw json.RawMessage) (s string, bad bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", true
	}
	return s, false
}

// readMsgpackEnvelope reads "id" and "reply_to" from a msgpack map.
func readMsgpackEnvelope(data []byte) envelope {
	entries, err := msgpackwalk.MapEntries(data)
	if err != nil {
		return envelope{}
	}
	f := envelope{readable: true}
	for _, e := range entries {
		if !e.KeyIsString || (e.Key != "id" && e.Key != "reply_to") {
			continue
		}
		v := data[e.ValStart:e.ValEnd]
		s, ok := msgpackwalk.String(v)
		bad := !ok && !msgpackwalk.IsNil(v)
		if e.Key == "id" {
			f.id, f.badID = s, bad || (ok && s == "") // "" names no result; nil falls back
		} else {
			f.replyTo, f.badReplyTo = s, bad
		}
	}
	return f
}
