package chain

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestBodyRulesEveryRowHolds gives each row of bodyRules a body that it is
// the first to match, so no row is dead or shadowed by an earlier one.
func TestBodyRulesEveryRowHolds(t *testing.T) {
	samples := []struct {
		status int
		body   string
		class  Class
	}{
		{403, openRouterFlagged, ClassRequest},
		{402, `{"error":{"message":"This request requires more credits, or fewer max_tokens. You requested up to 32000 tokens, but can only afford 27342.","code":402}}`, ClassRequest},
		{500, `{"error":{"message":"This model's maximum context length is 16384 tokens."}}`, ClassRequest},
		{429, tooLargeForTPM, ClassRequest},
		{404, `{"error":{"message":"No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}`, ClassRequest},
		{400, googleKeyInvalid, ClassAuth},
		{429, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, ClassAuth},
		{404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`, ClassServer},
		{404, `{"error":{"message":"No endpoints found for deepseek/deepseek-chat-v3.1:free.","code":404}}`, ClassServer},
		{200, `{"error":{"message":"slow down","code":429}}`, ClassRateLimit},
		{200, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, ClassRateLimit},
		{200, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, ClassServer},
		{200, `{"error":{"message":"too slow","status":"DEADLINE_EXCEEDED"}}`, ClassTimeout},
		{200, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: field required"}}`, ClassRequest},
		{200, `{"error":"upstream exploded"}`, ClassServer},
	}
	if len(samples) != len(bodyRules) {
		t.Fatalf("%d samples for %d rules: give every row one", len(samples), len(bodyRules))
	}
	for i, s := range samples {
		u := decodeErrorBody([]byte(s.body))
		r := ruleFor(s.status, u)
		if r == nil || r.description != bodyRules[i].description {
			t.Errorf("row %d (%s): %d %s matched %v", i, bodyRules[i].description, s.status, s.body, r)
			continue
		}
		if got := classifyBody(s.status, u); got != s.class {
			t.Errorf("row %d: class %s, want %s", i, got, s.class)
		}
	}
}

// TestEveryBodyRuleHasASource: each row says where its words come from,
// as a GitHub reference ("owner/repo#N") or an https URL, so that a reader
// can check a row against the body it was written from.
func TestEveryBodyRuleHasASource(t *testing.T) {
	for _, r := range bodyRules {
		if len(r.sources) == 0 {
			t.Errorf("row %q has no source", r.description)
		}
		for _, src := range r.sources {
			if !githubRef.MatchString(src) && !strings.HasPrefix(src, "https://") {
				t.Errorf("row %q: source %q is neither owner/repo#N nor an https URL", r.description, src)
			}
		}
	}
}

// TestDocsReproduceTheBodyTable keeps the table of docs/failures.md equal to the one
// the code uses; on failure it prints the rows to paste.
func TestDocsReproduceTheBodyTable(t *testing.T) {
	readme, err := os.ReadFile("../docs/failures.md")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, r := range bodyRules {
		if !strings.Contains(string(readme), r.markdownRow()+"\n") {
			missing = append(missing, r.markdownRow())
		}
	}
	if len(missing) > 0 {
		t.Fatalf("docs/failures.md lacks these rows of the body table:\n%s", strings.Join(missing, "\n"))
	}
}

func TestDecodeErrorBodyShapes(t *testing.T) {
	tests := []struct {
		name, body string
		want       upstreamError
	}{
		{"openai", `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			upstreamError{found: true, message: "m", names: []string{"invalid_request_error", "model_not_found"}}},
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			upstreamError{found: true, message: "Overloaded", names: []string{"overloaded_error"}}},
		{"string", `{"error":"text"}`, upstreamError{found: true, message: "text"}},
		{"numeric code", `{"error":{"message":"m","code":429}}`, upstreamError{found: true, message: "m", code: 429}},
		{"float code", `{"error":{"message":"m","code":503.0}}`, upstreamError{found: true, message: "m", code: 503}},
		{"code out of range is dropped", `{"error":{"message":"m","code":1008}}`, upstreamError{found: true, message: "m"}},
		{"google", `{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`,
			upstreamError{found: true, message: "m", names: []string{"RESOURCE_EXHAUSTED"}, code: 429, retryDelay: 1500 * time.Millisecond}},
		{"array yields the first error", `[{"nothing":1},{"error":{"message":"first"}},{"error":{"message":"second"}}]`,
			upstreamError{found: true, message: "first"}},
		{"vllm top level", `{"object":"error","message":"m","type":"BadRequestError","code":400}`,
			upstreamError{found: true, message: "m", names: []string{"BadRequestError"}, code: 400}},
		{"null error", `{"error":null,"choices":[]}`, upstreamError{raw: `{"error":null,"choices":[]}`}},
		{"plain text", " overloaded \n", upstreamError{raw: "overloaded"}},
		{"html", "\n<!DOCTYPE html><HTML><HEAD><TITLE attr=1>A &lt;b&gt;\n c</TITLE>", upstreamError{html: true, title: "A <b> c"}},
		{"xml", `<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>`, upstreamError{html: true}},
		// Google's ErrorInfo reason says what the status does not
		// (cequence-io/openai-scala-client#109), also its older errors[].reason.
		{"google ErrorInfo reason", googleKeyInvalid,
			upstreamError{found: true, message: "API key not valid. Please pass a valid API key.", names: []string{"INVALID_ARGUMENT", "API_KEY_INVALID"}, code: 400}},
		{"google errors reason", `{"error":{"code":429,"message":"m","errors":[{"message":"m","domain":"global","reason":"rateLimitExceeded"}],"status":"RESOURCE_EXHAUSTED"}}`,
			upstreamError{found: true, message: "m", names: []string{"RESOURCE_EXHAUSTED", "rateLimitExceeded"}, code: 429}},
		// Azure OpenAI's content filter (openai/openai-python#331).
		{"azure innererror", `{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{}}}}`,
			upstreamError{found: true, message: "filtered", names: []string{"content_filter", "ResponsibleAIPolicyViolation"}, code: 400}},
		// OpenRouter's metadata (https://openrouter.ai/docs/api-reference/errors).
		{"openrouter moderation", openRouterFlagged,
			upstreamError{found: true, message: `openai/gpt-4o requires moderation on OpenAI. Your input was flagged for "self-harm".`, code: 403, flagged: true}},
		{"openrouter flagged_input alone", `{"error":{"code":403,"message":"m","metadata":{"reasons":[],"flagged_input":"x"}}}`,
			upstreamError{found: true, message: "m", code: 403, flagged: true}},
		{"openrouter relayed JSON", `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"error\":{\"code\":\"400\",\"message\":\"Param Incorrect\",\"type\":\"invalid_request_error\"}}","provider_name":"Xiaomi"}}}`,
			upstreamError{found: true, message: "Provider returned error", names: []string{"invalid_request_error"}, code: 400, detail: "Param Incorrect"}},
		{"openrouter relayed Google 429", `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"code\":429,\"message\":\"q\",\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"7s\"}]}}"}}}`,
			upstreamError{found: true, message: "Provider returned error", names: []string{"RESOURCE_EXHAUSTED"}, code: 429, detail: "q", retryDelay: 7 * time.Second}},
		{"openrouter relayed message only", `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"message\":\"tool_choice is not supported for this model.\"}"}}}`,
			upstreamError{found: true, message: "Provider returned error", code: 400, detail: "tool_choice is not supported for this model."}},
		{"openrouter relayed text", `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"ERROR","provider_name":"Stealth"}}}`,
			upstreamError{found: true, message: "Provider returned error", code: 400, detail: "ERROR"}},
		{"openrouter headers", openRouterDailyLimit,
			upstreamError{found: true, message: "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day", code: 429,
				hintHeader: http.Header{"X-Ratelimit-Limit": {"50"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1741305600000"}}}},
		// Hugging Face's model loading (huggingface/unity-api#18), alone or
		// in an array (BerriAI/litellm#1242).
		{"hugging face loading", `{"error":"Model m is currently loading","estimated_time":20.0}`,
			upstreamError{found: true, message: "Model m is currently loading", loadWait: 20 * time.Second}},
		{"hugging face loading in an array", `[{"error":"Model m is currently loading","estimated_time":300.5}]`,
			upstreamError{found: true, message: "Model m is currently loading", loadWait: 300500 * time.Millisecond}},
		{"estimated_time that is no wait", `{"error":"loading","estimated_time":-3}`, upstreamError{found: true, message: "loading"}},
	}
	for _, tt := range tests {
		if got := decodeErrorBody([]byte(tt.body)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Real bodies the decoder and the table are tried against.
const (
	// tooLargeForTPM is OpenAI's 429 for a request larger than the whole
	// tokens-per-minute limit (vanderschaarlab/climb#1): no wait helps.
	tooLargeForTPM = `{"error":{"message":"Request too large for gpt-4o in organization org-V on tokens per min (TPM): Limit 30000, Requested 30601. ` +
		`The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.",` +
		`"type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	// googleKeyInvalid is Gemini's answer to a bad key, as its
	// OpenAI-compatible endpoint sends it, in an array
	// (cequence-io/openai-scala-client#109).
	googleKeyInvalid = `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com",` +
		`"metadata":{"service":"generativelanguage.googleapis.com"}}]}}]`
	// openRouterFlagged is OpenRouter's 403 for one flagged prompt
	// (https://openrouter.ai/docs/api-reference/errors, enricoros/big-AGI#352).
	openRouterFlagged = `{"error":{"code":403,"message":"openai/gpt-4o requires moderation on OpenAI. Your input was flagged for \"self-harm\".",` +
		`"metadata":{"reasons":["self-harm"]}}}`
	// openRouterDailyLimit is OpenRouter's 429 for a spent daily free
	// quota, its rate-limit headers in the body (Gitlawb/openclaude#936).
	openRouterDailyLimit = `{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day",` +
		`"code":429,"metadata":{"headers":{"X-RateLimit-Limit":"50","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1741305600000"}}}}`
)

// TestDecodeErrorBodyBounds: what the decoder keeps of a hostile body is
// bounded: names, relayed headers, and how deep relayed errors are read.
func TestDecodeErrorBodyBounds(t *testing.T) {
	var details, headers []string
	for i := range 100 {
		details = append(details, fmt.Sprintf(`{"@type":"google.rpc.ErrorInfo","reason":"R%d"}`, i))
		headers = append(headers, fmt.Sprintf(`"H%d":"v"`, i))
	}
	u := decodeErrorBody([]byte(`{"error":{"message":"m","details":[` + strings.Join(details, ",") + `],"metadata":{"headers":{` + strings.Join(headers, ",") + `}}}}`))
	if len(u.names) != maxNames || len(u.hintHeader) != maxBodyHeaders {
		t.Errorf("%d names, %d headers; want %d, %d", len(u.names), len(u.hintHeader), maxNames, maxBodyHeaders)
	}
	// Each level relays the next as a JSON string; below maxRelayDepth the
	// text is kept as it is, unread.
	doc := `{"error":{"message":"bottom","type":"deepest"}}`
	for i := range maxRelayDepth + 1 {
		raw, _ := json.Marshal(doc)
		doc = fmt.Sprintf(`{"error":{"message":"level %d","type":"t%d","metadata":{"raw":%s}}}`, i, i, raw)
	}
	u = decodeErrorBody([]byte(doc))
	if slices.Contains(u.names, "deepest") || len(u.names) != maxRelayDepth+1 {
		t.Errorf("names %v: want the top %d levels' only", u.names, maxRelayDepth+1)
	}
	// A message, or a body that is no error object, of megabytes is read
	// for its words and waits as far as maxReadText.
	long := strings.Repeat("try again in 1 ", 1<<16)
	for _, body := range []string{`{"error":{"message":"` + long + `"}}`, long} {
		u = decodeErrorBody([]byte(body))
		if n := len(u.message) + len(u.raw); n > maxReadText+len("…") || n < maxReadText/2 {
			t.Errorf("%d bytes of text kept of a %d-byte body, want at most %d", n, len(body), maxReadText)
		}
	}
}

func TestParseProtoDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "1.5s": 1500 * time.Millisecond, "0.000000001s": 1, "0s": 0} {
		if got, ok := parseProtoDuration(in); !ok || got != want {
			t.Errorf("parseProtoDuration(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "30", "s", "-1s", "1e3s", "NaNs", "1.s"} {
		if got, ok := parseProtoDuration(in); ok {
			t.Errorf("parseProtoDuration(%q) = %v, true; want refused", in, got)
		}
	}
}

// FuzzErrorBody feeds the error-body decoder and the table whatever a
// provider or a proxy might send: no panic, a class that only an HTTP
// failure can have, a wait within bounds, and a short, non-empty error text
// that for a page is its title or "HTML error page".
func FuzzErrorBody(f *testing.F) {
	for _, seed := range []string{
		`{"error":{"message":"m","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}`,
		`{"error":"text"}`, `{"error":{"message":"m","code":429}}`, `{"error":{"code":1e400}}`, `{"error":{"code":-429}}`,
		`[{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}]`,
		`{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"99999999999999999999s"}]}}`,
		`{"error":{"message":"Please try again in 1m30.5s"}}`, `{"object":"error","message":"m","code":"400"}`,
		"<!DOCTYPE html><title>example.com | 520</title>", "<html><title>unterminated", "", "null", "[]", "[null]",
		googleKeyInvalid, openRouterFlagged, openRouterDailyLimit,
		`{"error":"Model m is currently loading","estimated_time":1e400}`, `[{"error":"loading","estimated_time":-0.0}]`,
		`{"error":{"message":"filtered","code":"content_filter","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`,
		`{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"error\":{\"message\":\"prompt is too long\",\"metadata\":{\"raw\":\"[{\\\"error\\\":\\\"deep\\\"}]\"}}}"}}}`,
		`{"error":{"message":"m","metadata":{"raw":{"message":"object, not string"},"headers":{"X-RateLimit-Reset":"99999999999999999999"},"reasons":null}}}`,
	} {
		f.Add(200, []byte(seed))
		f.Add(500, []byte(seed))
	}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		u := decodeErrorBody(body)
		switch c := classifyBody(status, u); c {
		case ClassServer, ClassTimeout, ClassRateLimit, ClassAuth, ClassRequest:
		default:
			t.Fatalf("class %s for %d %q", c, status, body)
		}
		if d := waitHint(nil, u, now); d < 0 || d > maxHint {
			t.Fatalf("wait %v out of bounds for %q", d, body)
		}
		msg := errorText(u.text(), "")
		if msg == "" || len(msg) > maxErrorText+len("…") {
			t.Fatalf("error text %q for %q", msg, body)
		}
		if u.html && msg != "HTML error page" && !strings.Contains(string(body), "itle") {
			t.Fatalf("error text %q for a page without a title: %q", msg, body)
		}
		if utf8.Valid(body) && !utf8.ValidString(msg) {
			t.Fatalf("error text %q is not valid UTF-8", msg)
		}
	})
}

// TestAWaitHintMakesBillingWordsARateLimit: a body that names a wait, by
// Google's RetryInfo or in its message, is a rate limiter's, whose words of
// quota and billing name a window, not an account out of credit: never
// auth, whatever its status.
func TestAWaitHintMakesBillingWordsARateLimit(t *testing.T) {
	for _, body := range []string{
		`{"error":{"code":503,"message":"You exceeded your current quota, please check your plan and billing details.","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`,
		`{"error":{"message":"You exceeded your current quota, please check your plan and billing details. Please try again in 20s."}}`,
	} {
		if got := classifyBody(503, decodeErrorBody([]byte(body))); got != ClassServer {
			t.Errorf("503 %s: %s, want server (a 503 naming a wait)", body, got)
		}
	}
	// Without a wait, the same words are an account out of quota.
	if got := classifyBody(503, decodeErrorBody([]byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details."}}`))); got != ClassAuth {
		t.Errorf("without a wait: %s, want auth", got)
	}
}
