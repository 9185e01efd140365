package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/detourhq/detour/internal/text"
)

// decodeLevel decodes raw, one level of an answer, into v when raw holds
// anything, keeping the first error in *first. Answers are decoded a level
// at a time: encoding/json spends about 1 KiB of stack per level, on a
// worker's stack that must stay within 8 KiB (Chain.Run).
func decodeLevel(raw json.RawMessage, v any, first *error) {
	if len(raw) == 0 {
		return
	}
	if err := json.Unmarshal(raw, v); err != nil && *first == nil {
		*first = err
	}
}

// decodeUsage is decodeLevel that never fails: an answer the provider was
// paid for stands whatever shape its usage takes (zero counts).
func decodeUsage(raw json.RawMessage, v any) {
	var ignored error
	decodeLevel(raw, v, &ignored)
}

// tokenCount is any JSON number (gateways in Python send 12.0), rounded
// down within 0..MaxUsageTokens; a value of another kind reads as 0.
type tokenCount int

// UnmarshalJSON reads any JSON value and never fails.
func (n *tokenCount) UnmarshalJSON(b []byte) error {
	*n = tokenCount(jsonNumber(b, MaxUsageTokens))
	return nil
}

// jsonNumber is the JSON number raw within 0..limit, beyond which it may
// be as far as ±Inf; 0 for a value of another kind.
func jsonNumber(raw []byte, limit float64) float64 {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || !(f > 0) {
		return 0
	}
	return min(f, limit)
}

// refuse is the failure a 2xx body is instead of the answer resp decoded
// from it, nil when resp stands. A body that did not decode, has no text or
// is not complete is the failure its error object names, on the choice
// (OpenRouter's upstream dying mid-answer) or at the top level, with the
// stop reason; else, undecoded, invalid_output. It runs after decoding, so
// its frame is not on the stack meanwhile.
func refuse(resp *Response, decodeErr error, choice json.RawMessage, status int, header http.Header, body []byte, apiKey string) error {
	if decodeErr != nil || !resp.Complete || (isBlank(resp.Content) && resp.Refusal == "") {
		failure := bodyFailure(status, header, choice, apiKey)
		if failure == nil {
			failure = bodyFailure(status, header, body, apiKey)
		}
		if failure != nil {
			failure.StopReason = text.Cut(resp.StopReason, maxStopReason)
			return failure
		}
	}
	if decodeErr != nil {
		return &CallError{Class: ClassInvalidOutput, StatusCode: status, Err: errors.New("malformed answer body: " + decodeProblem(decodeErr))}
	}
	return nil
}

// decodeProblem words why an answer body did not decode, without the
// decoder's Go types.
func decodeProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		found := text.JSONFound(typeErr.Value)
		if typeErr.Field == "" {
			return fmt.Sprintf("%s where the API sends %s", found, text.JSONKind(typeErr.Type))
		}
		return fmt.Sprintf("%s is %s, not %s", typeErr.Field, found, text.JSONKind(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("not JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	}
	return err.Error()
}

// looseString is a text that only describes an answer (the model, a stop
// reason, a refusal): a JSON string, or "" for a value of another kind,
// which does not void an answer the provider was paid for.
type looseString string

// UnmarshalJSON reads any JSON value and never fails. A string without
// escapes is its bytes between the quotes (the decoder checked the
// literal): a nested json.Unmarshal would cost the stack another KiB.
func (s *looseString) UnmarshalJSON(b []byte) error {
	if n := len(b); n >= 2 && b[0] == '"' && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		*s = looseString(b[1 : n-1])
		return nil
	}
	var v string
	if json.Unmarshal(b, &v) != nil {
		v = ""
	}
	*s = looseString(v)
	return nil
}
