package chain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider answers one request with one attempt. It never retries on its own:
// retries, backoff and cooldowns belong to the chain.
type Provider interface {
	// Name is the provider's name in the chain file and its KV key token.
	Name() string
	// Model is the configured model, reported when the answer names none.
	Model() string
	// Call makes one attempt. A failure is returned as a *CallError. req
	// belongs to the caller: Call must not modify it or anything it refers
	// to (its Messages, Schema, Stale), nor keep any of it once it returns;
	// the caller may reuse it then. It is a pointer so that the worker's
	// stack, held for the whole wait on the provider, holds no copy of it.
	Call(ctx context.Context, req *Request) (Response, error)
}

// Message is one turn of the conversation.
type Message struct {
	Role    string `msgpack:"role" json:"role"`
	Content string `msgpack:"content" json:"content"`
}

// Request is what a provider is asked.
type Request struct {
	ID          string
	Messages    []Message
	MaxTokens   int
	Temperature *float64
	// Schema, when set, must be satisfied by the answer's content.
	Schema *Schema
	// Cache is what the request asks of the response cache.
	Cache CacheControl
	// Stale, when set, is an earlier answer that stands in when no
	// provider answers, before the rules provider (see StaleAnswer).
	Stale *StaleAnswer
}

// Usage counts tokens as the provider reported them.
type Usage struct {
	PromptTokens     int `msgpack:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens int `msgpack:"completion_tokens" json:"completion_tokens"`
}

// MaxUsageTokens bounds each count of a provider's usage report: far above
// any context window, so that no report can make a cost or a counter
// overflow.
const MaxUsageTokens = 1 << 30

// MaxModelBytes bounds the model an answer names, in bytes: the name goes
// into the Detour-Model header, a metric label and the response cache,
// which keeps no longer one. A longer one gives way to the configured model.
const MaxModelBytes = 256

// reportedUsage is a provider's usage report, each count bounded to
// [0, MaxUsageTokens]: a provider's numbers are outside input, and a
// negative one would make token and cost counters go backwards.
func reportedUsage(prompt, completion int) Usage {
	return Usage{PromptTokens: min(max(prompt, 0), MaxUsageTokens), CompletionTokens: min(max(completion, 0), MaxUsageTokens)}
}

// Response is a provider's 2xx answer, before validation.
type Response struct {
	Content string
	Model   string
	// Complete is set when the answer ended the way the provider's API
	// documents a complete answer (stop.go: OpenAI's finish_reason "stop",
	// Anthropic's stop_reason "end_turn" or "stop_sequence"). An answer
	// that is not complete, cut short, filtered, refused, ended by an error
	// or by a reason the API does not document, never wins, whatever text
	// it has. A Provider written in Go sets it for every answer it stands
	// behind.
	Complete bool
	// StopReason is why the provider stopped, as it spelled it (OpenAI's
	// finish_reason, Anthropic's stop_reason; "" when it sent none or
	// null), or "refusal" when an OpenAI answer carried message.refusal.
	StopReason string
	// Refusal is the text of OpenAI's message.refusal, the model declining
	// to answer; "" when it sent none.
	Refusal string
	Usage   Usage
}

// CallError is a failed attempt with everything the chain needs to decide what
// to do next.
type CallError struct {
	Class      Class
	StatusCode int
	// RetryAfter is the longest wait the provider asked for by any hint
	// (Retry-After, retry-after-ms, a retry delay in the error body), zero
	// if none.
	RetryAfter time.Duration
	// StopReason is the stop reason of a 2xx answer that ended with an
	// error object instead of a complete ending (OpenRouter's
	// finish_reason "error"), as the provider spelled it; "" otherwise.
	StopReason string
	Err        error
}

// Error names the class and, for an HTTP failure, the status.
func (e *CallError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s (HTTP %d): %v", e.Class, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

// Unwrap returns the underlying failure.
func (e *CallError) Unwrap() error { return e.Err }

// asCallError turns any error from Provider.Call into a *CallError, classifying
// transport errors and deadlines that an adapter returned as they were.
func asCallError(err error, parent context.Context) *CallError {
	var ce *CallError
	if errors.As(err, &ce) {
		if parent.Err() != nil {
			return &CallError{Class: ClassCanceled, Err: err}
		}
		return ce
	}
	return &CallError{Class: classifyError(err, parent), Err: err}
}

// classifyError maps an error that carries no HTTP status. The parent context
// tells shutdown (canceled) apart from the attempt's own deadline (timeout).
func classifyError(err error, parent context.Context) Class {
	switch {
	case parent.Err() != nil:
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return ClassTimeout
	default:
		return ClassNetwork
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
