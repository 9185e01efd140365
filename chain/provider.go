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
	// Call makes one attempt; a failure is a *CallError. req stays the
	// caller's: Call neither modifies nor keeps it or what it refers to. It
	// is a pointer so that the worker's stack holds no copy of it.
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
	// Stale, when set, may stand in when no provider answers (StaleAnswer).
	Stale *StaleAnswer
}

// Usage counts tokens as the provider reported them.
type Usage struct {
	PromptTokens     int `msgpack:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens int `msgpack:"completion_tokens" json:"completion_tokens"`
}

// MaxUsageTokens bounds each count of a provider's usage report, far above
// any context window, so that no cost or counter can overflow.
const MaxUsageTokens = 1 << 30

// MaxModelBytes bounds the model an answer names, in bytes (it goes into a
// header, a metric label and the cache); a longer one gives way to the
// configured model.
const MaxModelBytes = 256

// reportedUsage bounds each count of a provider's report to
// [0, MaxUsageTokens]: a negative one would make counters go backwards.
func reportedUsage(prompt, completion int) Usage {
	return Usage{PromptTokens: min(max(prompt, 0), MaxUsageTokens), CompletionTokens: min(max(completion, 0), MaxUsageTokens)}
}

// Response is a provider's 2xx answer, before validation.
type Response struct {
	Content string
	Model   string
	// Complete is set when the answer ended the way its API documents a
	// complete answer (stop.go); only then may it win. A Provider written
	// in Go sets it for every answer it stands behind.
	Complete bool
	// StopReason is the finish_reason or stop_reason as spelled, or
	// "refusal" for OpenAI's message.refusal.
	StopReason string
	// Refusal is the text of OpenAI's message.refusal; "" when none.
	Refusal string
	Usage   Usage
}

// CallError is a failed attempt, with what the chain needs to decide next.
type CallError struct {
	Class      Class
	StatusCode int
	// RetryAfter is the longest wait the provider asked for by any hint
	// (waitHint), zero if none.
	RetryAfter time.Duration
	// StopReason is that of a 2xx answer ended by an error object
	// (OpenRouter's finish_reason "error"); "" otherwise.
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

// asCallError turns any error from Provider.Call into a *CallError.
func asCallError(err error, parent context.Context) *CallError {
	if ce, ok := errors.AsType[*CallError](err); ok {
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
