package providertest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/samber/lo"
)

// Reply is what the server does with one request. The zero Reply is a 200
// with an empty answer.
type Reply struct {
	// Status is the HTTP status; 0 means 200. A status of 300 or more gets
	// the flavour's error body, shaped by the Error fields below.
	Status int
	// Content is the assistant text of a 2xx answer.
	Content string
	// FinishReason is the stop reason; "" means a normal stop. Either
	// flavour's spelling ("length" or "max_tokens") is sent in the server's;
	// other values are sent verbatim.
	FinishReason string
	// Header holds extra response headers, such as Retry-After; a
	// Content-Type here replaces the default application/json.
	Header http.Header
	// Delay is a wait before answering; it ends early when the client goes
	// away or the server closes.
	Delay time.Duration
	// Hang never answers: the handler waits until the client goes away or the
	// server closes (then the connection is dropped, as a dying server would).
	Hang bool
	// RawBody, when set, is written verbatim, with Status, instead of the
	// flavour's JSON.
	RawBody string
	// ErrorMessage is the message of an error document; "" names the status.
	ErrorMessage string
	// ErrorType replaces the error type the flavour sends for the status
	// (OpenAI's and Anthropic's error.type, Google's error.status).
	ErrorType string
	// ErrorCode replaces the code of an OpenAI or gateway error document: a
	// string ("insufficient_quota") or a number (429).
	ErrorCode any
	// ErrorShape lays the error document out as a gateway would; the zero
	// value is the flavour's own.
	ErrorShape ErrorShape
	// ErrorArray wraps the error document in a one-element JSON array, as
	// Gemini's OpenAI-compatible endpoint does.
	ErrorArray bool
	// ErrorStatus, on a 2xx reply, sends the error document for this status
	// in place of an answer, as gateways relay an upstream failure.
	ErrorStatus int
	// RetryDelay is the retryDelay of a google.rpc.RetryInfo detail in a
	// ShapeGoogle document, in its JSON form ("30s", "1.5s").
	RetryDelay string
	// ErrorReason is the reason of a google.rpc.ErrorInfo detail in a
	// ShapeGoogle document ("API_KEY_INVALID", "CONSUMER_SUSPENDED").
	ErrorReason string
	// ErrorMetadata is the metadata object of a ShapeGateway document, as
	// OpenRouter adds it (https://openrouter.ai/docs/api-reference/errors).
	ErrorMetadata map[string]any
	// EstimatedTime, when positive, is the estimated_time in seconds that
	// Hugging Face sends beside a ShapeString error for a model still loading.
	EstimatedTime float64
	// Refusal is the model declining to answer: OpenAI's message.refusal
	// (with content null when Content is empty); for Anthropic the answer
	// stops with stop_reason "refusal", its text Content or else Refusal.
	Refusal string
	// Usage, when set, is the token usage a 2xx answer reports; nil reports
	// the words of the prompt and of the answer, one token a word.
	Usage *Usage
	// UsageJSON, when set, is sent verbatim as the answer's usage member,
	// for shapes Usage cannot carry (12.0, exponents, strings, null). It
	// must be JSON: the handler panics on one that is not.
	UsageJSON json.RawMessage
	// Model is the model a 2xx answer names; "" names the model requested.
	Model string
	// MidAnswerError, on a 2xx reply, is the code of an error object sent
	// beside the answer's text, with ErrorMessage: on the choice, as
	// OpenRouter ends one whose upstream died mid-answer (OpenAI flavour),
	// or at the top level of the message (Anthropic flavour).
	MidAnswerError int
	// NullFinishReason sends finish_reason (Anthropic: stop_reason) as
	// JSON null; FinishReason is then ignored.
	NullFinishReason bool
}

// Usage is the token usage an answer reports: OpenAI's prompt_tokens and
// completion_tokens, Anthropic's input_tokens and output_tokens.
type Usage struct {
	Prompt, Completion int
}

// Script decides the Reply to each request. n is the 1-based number of this
// request on the server (SetScript does not reset it). Scripts run
// concurrently, so they must be safe for that; the builders here are pure
// functions of n, the request and the clock.
type Script func(n int, req Request) Reply

// OK answers every request with "<model> answers: <last user message>", so a
// test can see which model and prompt reached the server.
func OK() Script {
	return func(_ int, req Request) Reply {
		return Reply{Content: req.Model + " answers: " + lastUser(req.Messages)}
	}
}

// Answer answers every request with content.
func Answer(content string) Script {
	return func(int, Request) Reply { return Reply{Content: content} }
}

// Status answers every request with code and the flavour's error body for it.
func Status(code int) Script {
	return func(int, Request) Reply { return Reply{Status: code} }
}

// RateLimited answers 429 with a Retry-After header of retryAfter, either
// delay-seconds ("30") or an HTTP-date (time.Time.UTC().Format(http.TimeFormat)).
func RateLimited(retryAfter string) Script {
	return func(int, Request) Reply {
		// A fresh header per reply: a caller may change the one it gets.
		return Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {retryAfter}}}
	}
}

// Slow waits d before giving then's reply (nil then means OK).
func Slow(d time.Duration, then Script) Script {
	then = orOK(then)
	return func(n int, req Request) Reply {
		r := then(n, req)
		r.Delay += d
		return r
	}
}

// Hang never answers: the call ends only by the client's own timeout or
// cancellation, or by Server.Close.
func Hang() Script {
	return func(int, Request) Reply { return Reply{Hang: true} }
}

// Empty answers 200 with empty content, an invalid_output for the chain.
func Empty() Script { return Answer("") }

// Truncated answers 200 with partial content and finish reason "length"
// (OpenAI) or "max_tokens" (Anthropic).
func Truncated() Script {
	return func(int, Request) Reply {
		return Reply{Content: "The answer stops in the mid", FinishReason: "length"}
	}
}

// Malformed answers 200 with a body cut off in the middle, which no JSON
// decoder accepts.
func Malformed() Script {
	return func(int, Request) Reply {
		return Reply{RawBody: `{"id":"broken","choices":[{"message":{"content":"cut off`}
	}
}

// Flaky sends a failRatio share of requests to fail (nil means Status(500))
// and the rest to ok (nil means OK). Which requests fail depends only on seed
// and the request number, so a run is reproducible even with concurrent
// clients.
func Flaky(failRatio float64, seed int64, fail Script, ok Script) Script {
	// A generator seeded by (seed, n) alone: no shared one whose draws
	// would depend on the order in which concurrent requests arrive.
	return either(func(n int) bool {
		return rand.New(rand.NewPCG(uint64(seed), uint64(n))).Float64() < failRatio
	}, fail, ok)
}

// FailFirst gives requests 1..count fail's reply (nil means Status(500)) and
// later ones then's (nil means OK).
func FailFirst(count int, fail Script, then Script) Script {
	return either(func(n int) bool { return n <= count }, fail, then)
}

// Sequence gives request i the reply of scripts[i-1]; the last script answers
// every request after that. No scripts means OK.
func Sequence(scripts ...Script) Script {
	if len(scripts) == 0 {
		return OK()
	}
	return func(n int, req Request) Reply {
		i := min(max(n, 1), len(scripts)) - 1
		return orOK(scripts[i])(n, req)
	}
}

// Until uses before (nil means Status(500)) while the wall clock is before t
// and after (nil means OK) from then on: "down for its first minute" is
// Until(time.Now().Add(time.Minute), Status(503), OK()).
func Until(t time.Time, before Script, after Script) Script {
	return either(func(int) bool { return time.Now().Before(t) }, before, after)
}

// either answers the requests that failing picks with fail (nil means
// Status(500)) and the others with ok (nil means OK).
func either(failing func(n int) bool, fail, ok Script) Script {
	if fail == nil {
		fail = Status(http.StatusInternalServerError)
	}
	ok = orOK(ok)
	return func(n int, req Request) Reply {
		if failing(n) {
			return fail(n, req)
		}
		return ok(n, req)
	}
}

// JSON answers 200 with the JSON encoding of v as content, for tests of
// response_schema validation. It panics if v cannot be encoded, as that is a
// mistake in the test, found when the script is built.
func JSON(v any) Script {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("providertest.JSON: %v", err))
	}
	return Answer(string(b))
}

func orOK(s Script) Script {
	if s == nil {
		return OK()
	}
	return s
}

func lastUser(msgs []Message) string {
	m, _, _ := lo.FindLastIndexOf(msgs, func(m Message) bool { return m.Role == "user" })
	return m.Content
}
