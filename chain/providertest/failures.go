package providertest

import (
	"fmt"
	"html"
	"net/http"
)

// OutOfCredit answers in each service's words for an account with no credit
// left: OpenAI 429 with type and code "insufficient_quota", Anthropic 400.
func OutOfCredit() Script {
	return func(_ int, req Request) Reply {
		if req.Flavor == Anthropic {
			return Reply{Status: http.StatusBadRequest, ErrorMessage: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}
		}
		return Reply{Status: http.StatusTooManyRequests, ErrorType: "insufficient_quota", ErrorCode: "insufficient_quota", ErrorMessage: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}
	}
}

// ContextOverflow answers status in each service's words for a prompt longer
// than the model's context window; OpenAI's has code context_length_exceeded
// at 400, as OpenAI sends it (other statuses are self-hosted servers that
// relay only the message).
func ContextOverflow(status int) Script {
	return func(_ int, req Request) Reply {
		if req.Flavor == Anthropic {
			return Reply{Status: status, ErrorMessage: "prompt is too long: 215000 tokens > 200000 maximum"}
		}
		r := Reply{Status: status, ErrorMessage: "This model's maximum context length is 16384 tokens. However, your messages resulted in 20512 tokens. Please reduce the length of the messages."}
		if status == http.StatusBadRequest {
			r.ErrorCode = "context_length_exceeded"
		}
		return r
	}
}

// ErrorIn200 answers 200 with {"error":{"message":...,"code":code}} in place
// of an answer, as gateways relay an upstream failure.
func ErrorIn200(code int) Script {
	return func(int, Request) Reply { return Reply{ErrorStatus: code, ErrorShape: ShapeGateway} }
}

// ResourceExhausted answers 429 as Google does for a per-minute quota:
// status RESOURCE_EXHAUSTED, "Quota exceeded for metric ...", and a
// RetryInfo detail with retryDelay ("30s", "1.5s"; "" sends none). It is a
// rate limit, not an account out of credit.
func ResourceExhausted(retryDelay string) Script {
	return func(int, Request) Reply {
		return Reply{Status: http.StatusTooManyRequests, ErrorShape: ShapeGoogle, ErrorMessage: "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 15, model: gemini-2.0-flash", RetryDelay: retryDelay}
	}
}

// HTMLError answers status with an HTML error page, as a proxy or CDN sends
// when the service behind it fails (Cloudflare's 520, nginx's 502). The
// page's <title> is title (HTML-escaped); "" leaves the title out. The body
// also holds text that no error report should repeat: "cf-error-details"
// and a Ray ID.
func HTMLError(status int, title string) Script {
	head := ""
	if title != "" {
		head = "<title>" + html.EscapeString(title) + "</title>"
	}
	page := fmt.Sprintf(`<!DOCTYPE html>
<html lang="en-US">
<head>%s<meta charset="UTF-8"><style>body{font-family:sans-serif}</style></head>
<body><div id="cf-error-details"><h1>Error %d</h1>
<p>The web server reported an error. Ray ID: 8f2c1a9b7d3e4f50</p></div></body>
</html>
`, head, status)
	return func(int, Request) Reply {
		return Reply{Status: status, RawBody: page, Header: http.Header{"Content-Type": {"text/html; charset=UTF-8"}}}
	}
}

// ContentFiltered answers 200 with partial text that a content filter cut
// off: finish_reason "content_filter" (OpenAI), stop_reason "refusal"
// (Anthropic).
func ContentFiltered(partial string) Script {
	return func(int, Request) Reply { return Reply{Content: partial, FinishReason: "content_filter"} }
}

// Refusal answers 200 with the model declining: OpenAI's message.refusal
// with content null, Anthropic's text with stop_reason "refusal".
func Refusal(text string) Script {
	return func(int, Request) Reply { return Reply{Refusal: text} }
}

// DiedMidAnswer answers 200 with the text written before the upstream
// failed, partial (possibly ""), ended by finish_reason "error" and an
// error object of code on the choice, as OpenRouter sends it
// (https://openrouter.ai/docs/api-reference/errors, "Errors during
// generation"); the Anthropic flavour carries the error at the top level.
func DiedMidAnswer(partial string, code int) Script {
	return func(int, Request) Reply {
		return Reply{Content: partial, FinishReason: "error", MidAnswerError: code, ErrorMessage: "Provider returned error"}
	}
}

// WithHeader adds a response header to then's reply (nil then means OK):
// WithHeader("Retry-After-Ms", "3000", Status(429)), or a decimal
// Retry-After such as "2.5".
func WithHeader(key, value string, then Script) Script {
	then = orOK(then)
	return func(n int, req Request) Reply {
		r := then(n, req)
		h := r.Header.Clone() // the inner script may hand out a shared header
		if h == nil {
			h = http.Header{}
		}
		h.Add(key, value)
		r.Header = h
		return r
	}
}
