package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/internal/text"
)

// What each request field must be, as an error says it.
var fieldWants = map[string]string{
	"id":               "a string",
	"messages":         "a list of {role, content} objects",
	"messages.role":    "a string",
	"messages.content": "a string",
	"max_tokens":       "an integer",
	"temperature":      "a number",
	"response_schema":  "a JSON Schema object",
	"reply_to":         "a string",
	"deadline":         "an RFC 3339 string",
	"metadata":         "an object",
	"cache":            `an object such as {"no_store": true}`,
	"cache_scope":      "a string",
}

func fieldError(field, want, found string) error {
	return fmt.Errorf("%w: %s must be %s, not %s", ErrBadRequest, field, want, found)
}

// CheckJSONText refuses JSON text that encoding/json would read as U+FFFD:
// bytes that are not UTF-8 (RFC 8259 section 8.1) and a lone surrogate
// escape (section 8.2). The error names the offset, after "what" ("body").
func CheckJSONText(data []byte, what string) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%s is not valid UTF-8 at byte %d (JSON text is UTF-8, RFC 8259 section 8.1)", what, invalidUTF8At(data))
	}
	if bytes.Contains(data, []byte(`\u`)) {
		if at := loneSurrogateAt(data); at >= 0 {
			return fmt.Errorf("%s has a lone UTF-16 surrogate escape at byte %d, which is no character (RFC 8259, section 8.2)", what, at)
		}
	}
	return nil
}

// decodeJSONRequest decodes a JSON request body.
func decodeJSONRequest(data []byte, r *Request) error {
	if err := CheckJSONText(data, "body"); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	err := json.Unmarshal(data, r)
	if err == nil {
		if r.ID == "" && bytes.Contains(data, emptyString) && jsonGivesEmptyID(data) {
			return errEmptyID
		}
		return nil
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("%w: body is not valid JSON: %v", ErrBadRequest, syntaxErr)
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return fmt.Errorf("%w: body must be a JSON object, not %s", ErrBadRequest, text.JSONFound(typeErr.Value))
	case errors.As(err, &typeErr) && typeErr.Field == "messages" && typeErr.Type != nil && typeErr.Type.Kind() == reflect.Struct:
		// A list, one of whose elements is no object.
		return fieldError(messageField(data, typeErr.Field), "a {role, content} object", text.JSONFound(typeErr.Value))
	case errors.As(err, &typeErr):
		want, ok := fieldWants[typeErr.Field]
		if !ok {
			want = text.JSONKind(typeErr.Type)
		}
		return fieldError(messageField(data, typeErr.Field), want, text.JSONFound(typeErr.Value))
	}
	// A field's own decoder (metadata's) says what is wrong in its words.
	return fmt.Errorf("%w: %v", ErrBadRequest, err)
}

// loneSurrogateAt is the offset of the first \u escape in a string of data
// that spells half a surrogate pair alone, or -1.
func loneSurrogateAt(data []byte) int {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			r, size := text.UnicodeEscape(data, i)
			if r < 0 {
				return i
			}
			i += max(size, 2) - 1 // past the escape, or the escaped character
		}
	}
	return -1
}

// invalidUTF8At is the offset of the first byte not beginning valid UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// errEmptyID refuses an id given as "" (docs/requests.md, id).
var errEmptyID = fmt.Errorf("%w: id must not be empty; leave it out to be named by Nats-Msg-Id or the stream sequence", ErrBadRequest)

// emptyString is how an empty string is written in JSON: an id given as ""
// cannot be there without it, whatever escapes spell the key.
var emptyString = []byte(`""`)

// jsonGivesEmptyID reports whether a JSON body that decoded with no id
// names one as "" (not left out, or null). Only such bodies pay for reading
// it again: one pass telling them apart costs every request allocations.
func jsonGivesEmptyID(data []byte) bool {
	var probe struct {
		ID *string `json:"id"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.ID != nil && *probe.ID == ""
}

// messageField names the message a field error of encoding/json is about,
// "messages[2].role" or "messages[2]" where it says "messages.role" or
// "messages"; only a failed decode pays for reading them again. Other
// fields are returned as they are.
func messageField(data []byte, field string) string {
	rest, ok := strings.CutPrefix(field, "messages.")
	if !ok && field != "messages" {
		return field
	}
	var body struct{ Messages []json.RawMessage }
	if json.Unmarshal(data, &body) != nil {
		return field
	}
	for i, raw := range body.Messages {
		var m chain.Message
		if json.Unmarshal(raw, &m) == nil {
			continue
		}
		if !ok { // the element itself
			return fmt.Sprintf("messages[%d]", i)
		}
		return fmt.Sprintf("messages[%d].%s", i, rest)
	}
	return field
}

// decodeMsgpackRequest decodes a msgpack request body, a map whose known
// keys are decoded one by one, so that an error names its field and
// deadline may be a timestamp. Keys match exactly, the last duplicate wins,
// others are ignored. declared says the Content-Type named msgpack.
func decodeMsgpackRequest(data []byte, declared bool, r *Request) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: body is empty", ErrBadRequest)
	}
	entries, err := msgpackwalk.MapEntries(data)
	if errors.Is(err, msgpackwalk.ErrNotMap) {
		if declared {
			return fmt.Errorf("%w: body is not a msgpack map: %s", ErrBadRequest, describeStart(data))
		}
		return fmt.Errorf("%w: body is neither a JSON object nor msgpack: %s", ErrBadRequest, describeStart(data))
	}
	if err == nil {
		err = checkMsgpack(data)
	}
	if err == nil {
		// One map, as a JSON body is one object.
		if end, _ := msgpackwalk.ValueEnd(data, 0); end < len(data) {
			err = fmt.Errorf("%d bytes after its map", len(data)-end)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: body is not valid msgpack: %s", ErrBadRequest, strings.TrimPrefix(err.Error(), "msgpack: "))
	}
	for _, e := range entries {
		if !e.KeyIsString {
			continue
		}
		if err := decodeMsgpackField(r, e.Key, data[e.ValStart:e.ValEnd]); err != nil {
			return err
		}
	}
	return nil
}

// decodeMsgpackField sets the request field named key from its msgpack value;
// other keys are ignored.
func decodeMsgpackField(r *Request, key string, v []byte) error {
	wrongKind := func() error { return fieldError(key, fieldWants[key], msgpackwalk.Kind(v)) }
	switch key {
	case "id", "reply_to", "cache_scope":
		s, found := msgpackText(v)
		switch {
		case found != "":
			return fieldError(key, fieldWants[key], found)
		case key == "id" && s == "" && !msgpackwalk.IsNil(v):
			return errEmptyID
		case key == "id":
			r.ID = s
		case key == "reply_to":
			r.ReplyTo = s
		default:
			r.CacheScope = s
		}
	case "messages":
		msgs, err := decodeMsgpackMessages(v)
		if err != nil {
			return err
		}
		r.Messages = msgs
	case "max_tokens":
		var n int
		if msgpack.Unmarshal(v, &n) != nil {
			return wrongKind()
		}
		r.MaxTokens = n
	case "temperature":
		var t *float64
		if msgpack.Unmarshal(v, &t) != nil {
			return wrongKind()
		}
		r.Temperature = t
	case "response_schema":
		var s map[string]any
		if msgpack.Unmarshal(v, &s) != nil {
			if msgpackwalk.IsNil(v) || msgpackwalk.Kind(v) != "a map" {
				return wrongKind()
			}
			// The decoder's text names byte codes and extension ids.
			return fmt.Errorf("%w: response_schema must be a JSON Schema object: keys strings, values strings, numbers, true or false, null, lists or maps of these", ErrBadRequest)
		}
		r.ResponseSchema = s
	case "deadline":
		switch {
		case msgpackwalk.IsTimestamp(v):
			s, err := MsgpackDeadline(v)
			if err != nil {
				return err
			}
			r.Deadline = s
		case msgpackwalk.IsNil(v):
			r.Deadline = ""
		default:
			s, ok := msgpackwalk.String(v)
			if !ok {
				return fieldError(key, "an RFC 3339 string or a msgpack timestamp", msgpackwalk.Kind(v))
			}
			r.Deadline = s
		}
	case "cache":
		c, err := decodeMsgpackCache(v)
		if err != nil {
			return err
		}
		r.Cache = c
	case "metadata":
		var m chain.Metadata
		if err := msgpack.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		r.Metadata = m
	}
	return nil
}

// msgpackText decodes a value that must be text: a str, nil (as ""), or a
// bin, which msgpackwalk.Check does not hold to UTF-8. found says what the
// value is when it is no text.
func msgpackText(v []byte) (s, found string) {
	if msgpack.Unmarshal(v, &s) != nil {
		return "", msgpackwalk.Kind(v)
	}
	if !utf8.ValidString(s) {
		return "", "bytes that are not UTF-8"
	}
	return s, ""
}

// decodeMsgpackMessages decodes the messages list, naming the message and
// field of a wrong value.
func decodeMsgpackMessages(v []byte) ([]chain.Message, error) {
	if msgpackwalk.IsNil(v) {
		return nil, nil
	}
	spans, err := msgpackwalk.Elements(v)
	if err != nil {
		return nil, fieldError("messages", fieldWants["messages"], msgpackwalk.Kind(v))
	}
	msgs := make([]chain.Message, len(spans))
	for i, span := range spans {
		elem := v[span[0]:span[1]]
		entries, err := msgpackwalk.MapEntries(elem)
		if err != nil {
			return nil, fieldError(fmt.Sprintf("messages[%d]", i), "a {role, content} object", msgpackwalk.Kind(elem))
		}
		for _, e := range entries {
			if !e.KeyIsString || (e.Key != "role" && e.Key != "content") {
				continue
			}
			s, found := msgpackText(elem[e.ValStart:e.ValEnd])
			if found != "" {
				return nil, fieldError(fmt.Sprintf("messages[%d].%s", i, e.Key), "a string", found)
			}
			if e.Key == "role" {
				msgs[i].Role = s
			} else {
				msgs[i].Content = s
			}
		}
	}
	return msgs, nil
}

// describeStart says what a body that is not a msgpack map looks like.
func describeStart(data []byte) string {
	head := data[:min(len(data), quoteLimit+utf8.UTFMax)]
	for len(head) > 0 && !utf8.Valid(head) { // a rune cut at the end
		head = head[:len(head)-1]
	}
	if len(head) > 0 && isText(head) {
		return "it reads as text, " + quote(string(head))
	}
	return fmt.Sprintf("it starts with %s (byte 0x%02x)", msgpackwalk.Kind(data), data[0])
}

// isText reports whether s is printable text, line breaks allowed.
func isText(s []byte) bool {
	for _, r := range string(s) {
		if !unicode.IsPrint(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}
