package wire

import (
	"bytes"
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
// arrival goes (docs/results.md): one whose body DecodeRequest refused, or
// one too large to decode. It reads the body's "id" and "reply_to" best
// effort, field by field as DecodeRequest would read them, whatever else is
// wrong with the body; its cost is bounded by the body's size, whatever its
// nesting or declared lengths.
//
// The id is the body's "id", else the Nats-Msg-Id header, else seq, as for
// any request; a body that cannot be read at all counts as one without an
// "id". There is no address, and ok is false, when that id is not a valid
// one, or the body's "id" is there but is not a string: no result can be
// named for such a request. The reply subject is the body's "reply_to", else
// the Detour-Reply-To header, when it is allowed for this id and
// replyPrefixes; else the request's own result subject.
//
// The result is encoded as RefusedEncoding says.
func RefusedAddress(data []byte, header nats.Header, seq uint64, replyPrefixes []string) (a Address, ok bool) {
	enc, f := refusedEncoding(data, header)
	if f.badID {
		return Address{}, false
	}
	a.ID = RequestID(f.id, header.Get(HeaderMsgID), seq)
	if ValidateID(a.ID) != nil {
		return Address{}, false
	}
	replyTo := f.replyTo
	if replyTo == "" && !f.badReplyTo {
		replyTo = header.Get(HeaderReplyTo)
	}
	a.ReplyTo = ResultSubject(a.ID)
	if s, err := replySubject(a.ID, replyTo, replyPrefixes); err == nil && !f.badReplyTo {
		a.ReplyTo = s
	}
	a.Encoding = enc
	return a, true
}

// RefusedEncoding is the encoding of a refused request's failed result, as
// RefusedAddress gives it: the one its Content-Type names, else the one its
// body reads as, and JSON for a body that is neither a JSON object nor a
// msgpack map, or one whose Content-Type names neither.
func RefusedEncoding(data []byte, header nats.Header) Encoding {
	enc, _ := refusedEncoding(data, header)
	return enc
}

// refusedEncoding is RefusedEncoding, with the envelope read on the way.
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
	// readable: the body is a JSON object or a msgpack map.
	readable bool
	// id and replyTo are the fields when they are strings ("" when absent
	// or null); badID and badReplyTo say that one is there but is not a
	// string.
	id, replyTo       string
	badID, badReplyTo bool
}

// readJSONEnvelope reads "id" and "reply_to" from a JSON object, matching
// keys as encoding/json does (case-insensitively, the last duplicate
// winning).
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
	// An id given as "" names no result, as DecodeRequest refuses it;
	// one left out or null falls back.
	f.badID = f.badID || (f.id == "" && len(raw.ID) > 0 && !bytes.Equal(raw.ID, []byte("null")))
	// encoding/json reads bytes that are not UTF-8, and a lone surrogate
	// escape, as U+FFFD: the id read would be another than the one sent,
	// maybe another request's (decodeJSONRequest refuses such a body).
	f.badID = f.badID || CheckJSONText(raw.ID, "id") != nil
	return f
}

// jsonString decodes a JSON string; bad is true for a value of another
// kind. Absent and null read as "".
func jsonString(raw json.RawMessage) (s string, bad bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", true
	}
	return s, false
}

// readMsgpackEnvelope reads "id" and "reply_to" from a msgpack map, keys
// matching exactly, the last duplicate winning.
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
