package providertest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Flavor is the wire dialect a Server speaks.
type Flavor int

const (
	// OpenAI is the OpenAI-compatible chat completions API:
	// POST {URL}/chat/completions.
	OpenAI Flavor = iota
	// Anthropic is the Anthropic Messages API: POST {URL}/messages.
	Anthropic
)

// String gives the name a chain file uses for this provider type.
func (f Flavor) String() string {
	switch f {
	case OpenAI:
		return "openai"
	case Anthropic:
		return "anthropic"
	}
	return fmt.Sprintf("Flavor(%d)", int(f))
}

// completionPath is the one endpoint a flavour answers; everything else is 404.
func (f Flavor) completionPath() string {
	if f == Anthropic {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// finishReasons pairs each stop reason's spelling by OpenAI with
// Anthropic's, indexed by Flavor.
var finishReasons = [][2]string{{"stop", "end_turn"}, {"length", "max_tokens"}, {"content_filter", "refusal"}}

// stopReason is the finish_reason (stop_reason) member: JSON null, or the
// flavour's spelling of reason, so that scripts can say "length" or
// "max_tokens" without knowing which server runs them ("" is a normal
// stop; a reason of neither flavour is sent verbatim).
func (f Flavor) stopReason(reason string, null bool) *string {
	if null {
		return nil
	}
	reason = cmp.Or(reason, "stop")
	for _, pair := range finishReasons {
		if reason == pair[0] || reason == pair[1] {
			reason = pair[f]
		}
	}
	return &reason
}

// midAnswerError is the error object beside the text of a reply that
// sets MidAnswerError, nil for any other: OpenRouter's {"code","message"}
// on the choice, or the Anthropic error document's "error" member.
func (f Flavor) midAnswerError(r Reply) map[string]any {
	if r.MidAnswerError == 0 {
		return nil
	}
	message := cmp.Or(r.ErrorMessage, fmt.Sprintf("providertest: scripted %d %s mid-answer", r.MidAnswerError, statusText(r.MidAnswerError)))
	if f == Anthropic {
		return map[string]any{"type": anthropicErrorTypes.of(r.MidAnswerError), "message": message}
	}
	return map[string]any{"code": r.MidAnswerError, "message": message}
}

// successBody is the flavour's 2xx answer carrying r's content, stop reason
// and refusal.
func (f Flavor) successBody(n int, model string, r Reply, in, out int) []byte {
	var v, withError map[string]any // withError: where a mid-answer error goes
	if f == Anthropic {
		text, finish := r.Content, r.FinishReason
		if r.Refusal != "" {
			// Anthropic has no refusal field: the model's text stops with
			// stop_reason "refusal".
			finish, text = "refusal", cmp.Or(text, r.Refusal)
		}
		v = map[string]any{
			"id": fmt.Sprintf("msg_fake%06d", n), "type": "message", "role": "assistant", "model": model,
			"content":     []any{map[string]any{"type": "text", "text": text}},
			"stop_reason": f.stopReason(finish, r.NullFinishReason),
			"usage":       map[string]any{"input_tokens": in, "output_tokens": out},
		}
		withError = v
	} else {
		msg := map[string]any{"role": "assistant", "content": r.Content, "refusal": nil}
		if r.Refusal != "" {
			// The API answers a refusal with content null.
			msg["refusal"] = r.Refusal
			if r.Content == "" {
				msg["content"] = nil
			}
		}
		withError = map[string]any{"index": 0, "message": msg, "finish_reason": f.stopReason(r.FinishReason, r.NullFinishReason)}
		v = map[string]any{
			"id": fmt.Sprintf("chatcmpl-fake%06d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": model,
			"choices": []any{withError},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		}
	}
	if e := f.midAnswerError(r); e != nil {
		withError["error"] = e
	}
	if r.UsageJSON != nil {
		v["usage"] = r.UsageJSON
	}
	b, err := json.Marshal(v)
	if err != nil { // only a UsageJSON that is not JSON: the test is wrong
		panic(fmt.Sprintf("providertest: Reply.UsageJSON is not JSON: %v", err))
	}
	return b
}

func statusText(status int) string {
	if status == 529 {
		return "Overloaded" // Anthropic's own status, unknown to net/http
	}
	return http.StatusText(status)
}

// statusNames names an HTTP status as a service does: by the table, else
// by the name of any other 5xx (server) or of any other status (client).
type statusNames[V any] struct {
	table          map[int]V
	server, client V
}

func (n statusNames[V]) of(status int) V {
	if v, ok := n.table[status]; ok {
		return v
	}
	if status >= 500 {
		return n.server
	}
	return n.client
}

// anthropicErrorTypes are the error types Anthropic sends with a status.
var anthropicErrorTypes = statusNames[string]{map[int]string{
	529: "overloaded_error", http.StatusTooManyRequests: "rate_limit_error",
	http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
	http.StatusNotFound: "not_found_error", http.StatusRequestEntityTooLarge: "request_too_large",
}, "api_error", "invalid_request_error"}

// openAIError is the type and code OpenAI sends with a status; code is nil
// (JSON null) where OpenAI sends none.
type openAIError struct {
	typ  string
	code any
}

var openAIErrors = statusNames[openAIError]{map[int]openAIError{
	http.StatusTooManyRequests: {"requests", "rate_limit_exceeded"},
	http.StatusUnauthorized:    {"invalid_request_error", "invalid_api_key"},
	http.StatusForbidden:       {"permission_error", nil},
	http.StatusNotFound:        {"invalid_request_error", "model_not_found"},
}, openAIError{"server_error", nil}, openAIError{"invalid_request_error", nil}}
