package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
)

// Encoding is the wire format of a request, reused for its result.
type Encoding int

// The two wire formats.
const (
	MsgPack Encoding = iota
	JSON
)

// ContentType returns the MIME type of the encoding.
func (e Encoding) ContentType() string {
	if e == JSON {
		return "application/json"
	}
	return "application/msgpack"
}

// Header names a request or result may carry.
const (
	HeaderContentType = "Content-Type"
	HeaderMsgID       = nats.MsgIdHdr
	HeaderReplyTo     = "Detour-Reply-To"
	HeaderRequestID   = "Detour-Request-Id"
	HeaderModel       = "Detour-Model"
	HeaderProvider    = "Detour-Provider"
	HeaderDegraded    = "Detour-Degraded"
	HeaderStatus      = "Detour-Status"
	// HeaderRequestSeq names the request message a result answers (its
	// sequence in DETOUR_REQUESTS), so a redelivery recognises its own
	// answer and a later request reusing the id does not.
	HeaderRequestSeq = "Detour-Request-Seq"
)

// maxIDLen is the longest request id; ids become subject tokens.
const maxIDLen = 128

// Request is a request as published on detour.requests.<chain> (DESIGN.md §3).
type Request struct {
	ID             string            `msgpack:"id,omitempty" json:"id,omitempty"`
	Messages       []chain.Message   `msgpack:"messages" json:"messages"`
	MaxTokens      int               `msgpack:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Temperature    *float64          `msgpack:"temperature,omitempty" json:"temperature,omitempty"`
	ResponseSchema map[string]any    `msgpack:"response_schema,omitempty" json:"response_schema,omitempty"`
	ReplyTo        string            `msgpack:"reply_to,omitempty" json:"reply_to,omitempty"`
	Deadline       string            `msgpack:"deadline,omitempty" json:"deadline,omitempty"`
	Metadata       map[string]string `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
}

// ErrBadRequest marks a request that can never be processed; the error text
// says why.
var ErrBadRequest = errors.New("bad request")

// ErrBadReplySubject marks a reply subject outside the allowed prefixes.
var ErrBadReplySubject = errors.New("bad reply subject")

// Decoded is a request that passed decoding and validation, with its
// defaults resolved.
type Decoded struct {
	Request
	Encoding Encoding
	// DeadlineAt is the parsed deadline, zero when the request named none.
	DeadlineAt time.Time
}

// DetectEncoding picks the wire format from the Content-Type header or, when
// there is none, from the first byte: '{' is JSON, anything else msgpack.
func DetectEncoding(data []byte, header nats.Header) (Encoding, error) {
	if ct := header.Get(HeaderContentType); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return 0, fmt.Errorf("%w: unreadable Content-Type %q", ErrBadRequest, ct)
		case media == "application/json":
			return JSON, nil
		case media == "application/msgpack", media == "application/x-msgpack", media == "application/vnd.msgpack":
			return MsgPack, nil
		default:
			return 0, fmt.Errorf("%w: unsupported Content-Type %q (want application/json or application/msgpack)", ErrBadRequest, ct)
		}
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return JSON, nil
	}
	return MsgPack, nil
}

// DecodeRequest decodes and validates a request body. seq is the stream
// sequence, the id of last resort. replyPrefixes are the allowed reply
// subject prefixes. Errors wrap ErrBadRequest or ErrBadReplySubject.
func DecodeRequest(data []byte, header nats.Header, seq uint64, replyPrefixes []string) (Decoded, error) {
	enc, err := DetectEncoding(data, header)
	if err != nil {
		return Decoded{}, err
	}
	var d Decoded
	d.Encoding = enc
	if enc == JSON {
		err = json.Unmarshal(data, &d.Request)
	} else {
		err = unmarshalMsgpack(data, &d.Request)
	}
	if err != nil {
		return d, fmt.Errorf("%w: body is not a valid %s request: %v", ErrBadRequest, enc.ContentType(), err)
	}
	if d.ID == "" {
		d.ID = header.Get(HeaderMsgID)
	}
	if d.ID == "" {
		d.ID = fmt.Sprint(seq)
	}
	if err := validateRequest(&d, header, replyPrefixes); err != nil {
		return d, err
	}
	return d, nil
}

func validateRequest(d *Decoded, header nats.Header, replyPrefixes []string) error {
	if err := ValidateID(d.ID); err != nil {
		return err
	}
	if len(d.Messages) == 0 {
		return fmt.Errorf("%w: messages is required and must not be empty", ErrBadRequest)
	}
	for i, m := range d.Messages {
		if m.Role == "" {
			return fmt.Errorf("%w: messages[%d].role is required", ErrBadRequest, i)
		}
	}
	if d.MaxTokens < 0 {
		return fmt.Errorf("%w: max_tokens must not be negative", ErrBadRequest)
	}
	if d.Temperature != nil && *d.Temperature < 0 {
		return fmt.Errorf("%w: temperature must not be negative", ErrBadRequest)
	}
	if d.Deadline != "" {
		t, err := time.Parse(time.RFC3339, d.Deadline)
		if err != nil {
			return fmt.Errorf("%w: deadline %q is not RFC 3339", ErrBadRequest, d.Deadline)
		}
		d.DeadlineAt = t
	}
	if d.ReplyTo == "" {
		d.ReplyTo = header.Get(HeaderReplyTo)
	}
	if d.ReplyTo == "" {
		d.ReplyTo = ResultSubject(d.ID)
		return nil
	}
	if IsResultSubject(d.ReplyTo) && d.ReplyTo != ResultSubject(d.ID) {
		// The results stream is the record of every request's answer: a
		// reply stored under another id would pass for that request's.
		return fmt.Errorf("%w: %q is another request's result subject", ErrBadReplySubject, d.ReplyTo)
	}
	return ValidateReplySubject(d.ReplyTo, replyPrefixes)
}

// ChainRequest is what the chain is asked for this request; a
// response_schema is compiled here, and one that does not compile makes the
// request a bad one.
func (r Request) ChainRequest() (chain.Request, error) {
	req := chain.Request{ID: r.ID, Messages: r.Messages, MaxTokens: r.MaxTokens, Temperature: r.Temperature}
	if r.ResponseSchema != nil {
		schema, err := chain.CompileSchema(r.ResponseSchema)
		if err != nil {
			return req, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		req.Schema = schema
	}
	return req, nil
}

// ValidateID checks that a request id can stand as one subject token.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: id is empty", ErrBadRequest)
	case len(id) > maxIDLen:
		return fmt.Errorf("%w: id is longer than %d bytes", ErrBadRequest, maxIDLen)
	case strings.ContainsAny(id, ".*> \t\r\n\f\v\x00"):
		return fmt.Errorf("%w: id %q must be one subject token (no '.', '*', '>' or spaces)", ErrBadRequest, id)
	}
	return nil
}

// ValidateReplySubject refuses a reply subject that is not a plain publish
// subject under one of the allowed prefixes, so that no request can make a
// processor publish to an API subject such as $JS.API.….
func ValidateReplySubject(subject string, prefixes []string) error {
	if !validPublishSubject(subject) {
		return fmt.Errorf("%w: %q is not a valid publish subject", ErrBadReplySubject, subject)
	}
	for _, p := range prefixes {
		if strings.HasPrefix(subject, p) && len(subject) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q must start with one of %s", ErrBadReplySubject, subject, strings.Join(prefixes, ", "))
}

func validPublishSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n\f\v\x00") {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
	}
	return true
}

// EncodeResult encodes a result in the request's format.
func EncodeResult(res chain.Result, enc Encoding) ([]byte, error) {
	if enc == JSON {
		return json.Marshal(res)
	}
	return msgpack.Marshal(res)
}

// DecodeResult decodes a result body, detecting its format like a request's.
func DecodeResult(data []byte, header nats.Header) (chain.Result, error) {
	var res chain.Result
	enc, err := DetectEncoding(data, header)
	if err != nil {
		return res, err
	}
	if enc == JSON {
		err = json.Unmarshal(data, &res)
	} else {
		err = unmarshalMsgpack(data, &res)
	}
	return res, err
}
