package providertest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The failures below are the ones a gateway or a hosted model in front of
// either API sends, in that gateway's shape whatever the flavour: a test
// points either adapter at them. Each says where the shape comes from.

// Moderated answers a request whose last user message holds word (ignoring
// case) as OpenRouter does for a prompt its moderation flags: 403 with
// {"error":{"code":403,"message":"<model> requires moderation on OpenAI.
// Your input was flagged for \"<reason>\".","metadata":{"reasons":[reason],
// "flagged_input":<the message, at most 100 bytes>}}}
// (https://openrouter.ai/docs/api-reference/errors, enricoros/big-AGI#352).
// Other requests get then's reply (nil means OK).
func Moderated(word, reason string, then Script) Script {
	then = orOK(then)
	return func(n int, req Request) Reply {
		prompt := lastUser(req.Messages)
		if !strings.Contains(strings.ToLower(prompt), strings.ToLower(word)) {
			return then(n, req)
		}
		return Reply{
			Status:       http.StatusForbidden,
			ErrorShape:   ShapeGateway,
			ErrorMessage: fmt.Sprintf("%s requires moderation on OpenAI. Your input was flagged for %q.", req.Model, reason),
			ErrorMetadata: map[string]any{
				"reasons":       []string{reason},
				"flagged_input": prompt[:min(len(prompt), 100)],
			},
		}
	}
}

// KeyInvalid answers as Gemini does for an API key it does not know: 400
// INVALID_ARGUMENT "API key not valid. Please pass a valid API key." with a
// google.rpc.ErrorInfo of reason API_KEY_INVALID, in an array as its
// OpenAI-compatible endpoint sends it (cequence-io/openai-scala-client#109).
func KeyInvalid() Script {
	return func(int, Request) Reply {
		return Reply{
			Status: http.StatusBadRequest, ErrorShape: ShapeGoogle, ErrorArray: true, ErrorType: "INVALID_ARGUMENT",
			ErrorMessage: "API key not valid. Please pass a valid API key.", ErrorReason: "API_KEY_INVALID",
		}
	}
}

// NoEndpoints answers as OpenRouter does while no provider serves the
// model: 404 {"error":{"message":"No endpoints found for <model>.","code":404}}
// (chatboxai/chatbox#2743), a condition that passes.
func NoEndpoints() Script {
	return func(_ int, req Request) Reply {
		return Reply{Status: http.StatusNotFound, ErrorShape: ShapeGateway, ErrorMessage: "No endpoints found for " + req.Model + "."}
	}
}

// ModelLoading answers as Hugging Face's inference API does while the
// model loads: 503 {"error":"Model <model> is currently loading",
// "estimated_time":seconds} (huggingface/unity-api#18).
func ModelLoading(seconds float64) Script {
	return func(_ int, req Request) Reply {
		return Reply{Status: http.StatusServiceUnavailable, ErrorShape: ShapeString,
			ErrorMessage: "Model " + req.Model + " is currently loading", EstimatedTime: seconds}
	}
}

// DailyLimit answers as OpenRouter does once the free models' daily quota
// is spent: 429 "Rate limit exceeded: free-models-per-day. …" with the
// window's headers in the body, X-RateLimit-Reset in milliseconds since
// the epoch (Gitlawb/openclaude#936).
func DailyLimit(reset time.Time) Script {
	return func(int, Request) Reply {
		return Reply{
			Status:       http.StatusTooManyRequests,
			ErrorShape:   ShapeGateway,
			ErrorMessage: "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day",
			ErrorMetadata: map[string]any{"headers": map[string]string{
				"X-RateLimit-Limit":     "50",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     strconv.FormatInt(reset.UnixMilli(), 10),
			}},
		}
	}
}
