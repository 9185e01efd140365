package wire

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"strconv"
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

// ContentType returns the encoding's MIME type.
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
	// HeaderCache mirrors a result's cache field; absent without a cache.
	HeaderCache = "Detour-Cache"
	// HeaderRequestSeq is the sequence in DETOUR_REQUESTS of the request
	// message a result answers.
	HeaderRequestSeq = "Detour-Request-Seq"
	// HeaderRequestTime is when that message was stored, by the server's
	// clock, in RFC 3339 with nanoseconds: with the sequence it names the
	// message even in a stream created again.
	HeaderRequestTime = "Detour-Request-Time"
	// HeaderDelivery names the delivery that stored a result, so that a
	// processor whose store timed out but landed knows its own result.
	HeaderDelivery = "Detour-Delivery"
)

// Request is a request as published on detour.requests.<chain> (docs/requests.md).
type Request struct {
	ID             string          `msgpack:"id,omitempty" json:"id,omitempty"`
	Messages       []chain.Message `msgpack:"messages" json:"messages"`
	MaxTokens      int             `msgpack:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Temperature    *float64        `msgpack:"temperature,omitempty" json:"temperature,omitempty"`
	ResponseSchema map[string]any  `msgpack:"response_schema,omitempty" json:"response_schema,omitempty"`
	ReplyTo        string          `msgpack:"reply_to,omitempty" json:"reply_to,omitempty"`
	Deadline       string          `msgpack:"deadline,omitempty" json:"deadline,omitempty"`
	Metadata       chain.Metadata  `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	// Cache and CacheScope steer the response cache of a chain with one.
	Cache      *CacheControl `msgpack:"cache,omitempty" json:"cache,omitempty"`
	CacheScope string        `msgpack:"cache_scope,omitempty" json:"cache_scope,omitempty"`
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
	// DeadlineAt is the parsed deadline when HasDeadline (zero included).
	DeadlineAt time.Time
}

// HasDeadline reports whether the request named a deadline.
func (d *Decoded) HasDeadline() bool { return d.Deadline != "" }

// DetectEncoding picks the wire format from the Content-Type header, else
// from the first byte other than a space: '{' is JSON, anything else msgpack.
func DetectEncoding(data []byte, header nats.Header) (Encoding, error) {
	if ct := header.Get(HeaderContentType); ct != "" {
		media, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return 0, fmt.Errorf("%w: unreadable Content-Type %s", ErrBadRequest, quote(ct))
		case media == "application/json":
			return JSON, nil
		case media == "application/msgpack", media == "application/x-msgpack", media == "application/vnd.msgpack":
			return MsgPack, nil
		default:
			return 0, fmt.Errorf("%w: unsupported Content-Type %s (want application/json or application/msgpack)", ErrBadRequest, quote(ct))
		}
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return JSON, nil
	}
	return MsgPack, nil
}

// RequestID is a request's id: the body's "id", else its Nats-Msg-Id
// header, else its sequence in RequestsStream; "" for none (sequence 0).
func RequestID(bodyID, msgID string, seq uint64) string {
	switch {
	case bodyID != "":
		return bodyID
	case msgID != "":
		return msgID
	case seq != 0:
		return strconv.FormatUint(seq, 10)
	}
	return ""
}

// DecodeRequest decodes and validates a request body stored at seq, given
// the allowed reply prefixes. Errors wrap ErrBadRequest or ErrBadReplySubject.
func DecodeRequest(data []byte, header nats.Header, seq uint64, replyPrefixes []string) (Decoded, error) {
	enc, err := DetectEncoding(data, header)
	if err != nil {
		return Decoded{}, err
	}
	d := Decoded{Encoding: enc}
	if enc == JSON {
		err = decodeJSONRequest(data, &d.Request)
	} else {
		err = decodeMsgpackRequest(data, header.Get(HeaderContentType) != "", &d.Request)
	}
	if err != nil {
		return d, err
	}
	d.ID = RequestID(d.ID, header.Get(HeaderMsgID), seq)
	err = validateRequest(&d, header, replyPrefixes)
	return d, err
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
	if d.MaxTokens < 0 || d.MaxTokens > MaxMaxTokens {
		return fmt.Errorf("%w: max_tokens must be between 0 and %d", ErrBadRequest, MaxMaxTokens)
	}
	if t := d.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) { // msgpack can carry them
		return fmt.Errorf("%w: temperature must be a finite number, not negative", ErrBadRequest)
	}
	if err := validateMetadata(d.Metadata); err != nil {
		return err
	}
	if err := validateCacheScope(d.CacheScope); err != nil {
		return err
	}
	if d.ResponseSchema != nil {
		// Before anything costs: compiling costs about the cube of its depth.
		if err := chain.CheckSchema(d.ResponseSchema); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
	}
	if d.Deadline != "" {
		t, ok := ParseDeadline(d.Deadline)
		if !ok {
			return fmt.Errorf("%w: deadline %s is not an RFC 3339 time", ErrBadRequest, quote(d.Deadline))
		}
		d.DeadlineAt = t
	}
	var err error
	d.ReplyTo, err = replySubject(d.ID, cmp.Or(d.ReplyTo, header.Get(HeaderReplyTo)), replyPrefixes)
	return err
}

// replySubject is where the result of the request with the valid id goes,
// given the reply subject it named, or an error wrapping ErrBadReplySubject.
func replySubject(id, replyTo string, replyPrefixes []string) (string, error) {
	own := ResultSubject(id)
	if replyTo == "" || replyTo == own { // valid, as the id is
		return own, nil
	}
	return replyTo, CheckReplySubject(replyTo, replyPrefixes)
}

// CheckReplySubject refuses a reply subject that no request may name, other
// than its own result subject: one ValidateReplySubject refuses, and any
// result subject (a reply stored under another id would pass for that
// request's). The error wraps ErrBadReplySubject.
func CheckReplySubject(subject string, replyPrefixes []string) error {
	if IsResultSubject(subject) {
		return fmt.Errorf("%w: %s is another request's result subject", ErrBadReplySubject, quote(subject))
	}
	return ValidateReplySubject(subject, replyPrefixes)
}

// ChainRequest is what the chain is asked for this request, its response_schema
// compiled through schemas when it is not nil (returning once ctx ends), else
// directly. The error wraps ErrBadRequest, and ctx's error when ctx ended
// first. The receiver is a pointer so that a caller's frame holds no copy of d.
func (d *Decoded) ChainRequest(ctx context.Context, schemas *chain.SchemaCache) (chain.Request, error) {
	req := chain.Request{ID: d.ID, Messages: d.Messages, MaxTokens: d.MaxTokens, Temperature: d.Temperature,
		Cache: d.cacheControl()}
	if d.ResponseSchema == nil {
		return req, nil
	}
	var err error
	if schemas != nil {
		req.Schema, err = schemas.Compile(ctx, d.ResponseSchema)
	} else {
		req.Schema, err = chain.CompileSchema(d.ResponseSchema)
	}
	if err != nil {
		return req, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return req, nil
}

// EncodeResult encodes a result in the request's format.
func EncodeResult(res chain.Result, enc Encoding) ([]byte, error) {
	return new(ResultEncoder).Encode(&res, enc)
}

// ResultEncoder encodes results into a buffer it reuses: what Encode
// returns is valid until its next call. The zero value
// is ready; it is not safe for concurrent use.
type ResultEncoder struct {
	buf  bytes.Buffer
	json *json.Encoder // writes to buf
	res  chain.Result  // what is encoded: a copy here costs no allocation
}

// Encode encodes *res in enc; a pointer, since a result is large and its
// caller's stack is a worker's (BENCHMARKS.md).
func (e *ResultEncoder) Encode(res *chain.Result, enc Encoding) ([]byte, error) {
	e.buf.Reset()
	e.res = *res
	var err error
	if enc == JSON {
		if e.json == nil {
			e.json = json.NewEncoder(&e.buf)
		}
		err = e.json.Encode(&e.res)
	} else {
		mp := msgpack.GetEncoder() // as msgpack.Marshal does, but into buf
		mp.Reset(&e.buf)
		err = mp.Encode(&e.res)
		msgpack.PutEncoder(mp)
	}
	e.res = chain.Result{} // keep nothing of the request once encoded
	if err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	if enc == JSON {
		b = b[:len(b)-1] // Encode ends the value with a newline; Marshal does not
	}
	return b, nil
}

// Cap is how many bytes the encoder's buffer holds on to.
func (e *ResultEncoder) Cap() int { return e.buf.Cap() }

// DecodeResult decodes a result body, detecting its format like a request's.
func DecodeResult(data []byte, header nats.Header) (chain.Result, error) {
	var res chain.Result
	enc, err := DetectEncoding(data, header)
	if err != nil {
		return res, err
	}
	if enc == JSON {
		err = json.Unmarshal(data, &res)
	} else if err = checkMsgpack(data); err == nil {
		err = msgpack.Unmarshal(data, &res)
	}
	return res, err
}

// PayloadSize is what a server counts of m against its max payload.
func PayloadSize(m *nats.Msg) int64 { return int64(m.Size() - len(m.Subject) - len(m.Reply)) }
