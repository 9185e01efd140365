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

// decodeLevel decodes raw, one level of an answer left as json.RawMessage,
// into v, when raw holds anything, and keeps the error in *first unless an
// earlier one is there. Answers are decoded a level at a time
// (decodeOpenAIAnswer, decodeAnthropicAnswer): encoding/json's decoder
// spends about 1 KiB of stack per level of nesting, on the stack of a
// worker that must stay within 8 KiB while it decodes (Chain.Run).
func decodeLevel(raw json.RawMessage, v any, first *error) {
	if len(raw) == 0 {
		return
	}
	if err := json.Unmarshal(raw, v); err != nil && *first == nil {
		*first = err
	}
}

// decodeUsage decodes an answer's usage member into v, a struct of
// tokenCount fields, as decodeLevel would, but never fails: usage only
// counts, and an answer the provider was paid for stands whatever shape
// its usage takes. A usage that is not an object reads as zero counts.
func decodeUsage(raw json.RawMessage, v any) {
	var ignored error
	decodeLevel(raw, v, &ignored)
}

// tokenCount is a token count as a provider's usage reports it: any JSON
// number, 12.0 and 1.2e1 too (gateways written in Python send floats),
// rounded down and held within 0..MaxUsageTokens; a value of another kind
// (a string, null, a list) reads as 0.
type tokenCount int

// UnmarshalJSON reads any JSON value and never fails.
func (n *tokenCount) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange): // not a number
		*n = 0
	case f <= 0: // -Inf too
		*n = 0
	case f >= MaxUsageTokens: // +Inf too
		*n = MaxUsageTokens
	default:
		*n = tokenCount(f)
	}
	return nil
}

// refuse is the failure a 2xx answer body is instead of the answer resp
// decoded from it, nil when resp stands (validate still judges it). A body
// that did not decode, has no answer text or did not end complete is the
// failure its error object names, when it holds one: on the choice
// (choice, OpenRouter's when its upstream died mid-answer), else at the top
// level (a gateway's {"type":"error",...} or {"error":...} sent with 200,
// answerFailure); the answer's stop reason goes with it. A body that did
// not decode and holds none is invalid_output. An error object beside a
// complete answer says nothing of it. refuse runs once decoding has
// returned, not around it, so that its frame is not on the worker's stack
// while the answer is decoded (decodeLevel).
func refuse(resp *Response, decodeErr error, choice json.RawMessage, status int, header http.Header, body []byte, apiKey string) error {
	if decodeErr != nil || !resp.Complete || (isBlank(resp.Content) && resp.Refusal == "") {
		failure := answerFailure(status, header, choice, apiKey)
		if failure == nil {
			failure = answerFailure(status, header, body, apiKey)
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
// decoder's Go types: the member holding a value of the wrong kind and the
// kind it should be, or where the text stops being JSON.
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

// looseString is an answer's text that only describes it (the model, a
// stop reason, a refusal): a JSON string, or "" for a value of another
// kind, which does not void an answer the provider was paid for.
type looseString string

// UnmarshalJSON reads any JSON value and never fails.
//
// A string without escapes, valid UTF-8, is its bytes between the quotes
// (the decoder has checked the literal): a second json.Unmarshal, nested in
// the first, would cost a worker's stack more than a kilobyte at its
// deepest, and double it (BENCHMARKS.md). Any other value is decoded.
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
