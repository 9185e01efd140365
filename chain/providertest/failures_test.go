package providertest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	pt "github.com/detourhq/detour/chain/providertest"
)

// sendScript starts a server of flavour f running script, sends one valid
// request and returns the answer.
func sendScript(t *testing.T, f pt.Flavor, script pt.Script) result {
	t.Helper()
	s := pt.New(f, script)
	defer s.Close()
	return mustSend(t, s, f, body(f, "m", "hi"))
}

// decodeAny decodes a JSON body into generic values, failing the test if it
// is not JSON.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %s is not JSON: %v", b, err)
	}
	return v
}

// wantJSON compares a body with the JSON document want, ignoring layout.
func wantJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(decodeAny(t, got))
	ws, _ := json.Marshal(w)
	if string(g) != string(ws) {
		t.Errorf("body\n got  %s\n want %s", g, ws)
	}
}

func TestOutOfCredit(t *testing.T) {
	r := sendScript(t, pt.OpenAI, pt.OutOfCredit())
	if r.status != 429 {
		t.Errorf("openai status %d, want 429", r.status)
	}
	wantJSON(t, r.body, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)

	r = sendScript(t, pt.Anthropic, pt.OutOfCredit())
	if r.status != 400 {
		t.Errorf("anthropic status %d, want 400", r.status)
	}
	wantJSON(t, r.body, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`)
}

func TestContextOverflow(t *testing.T) {
	for _, status := range []int{400, 500} {
		r := sendScript(t, pt.OpenAI, pt.ContextOverflow(status))
		code := "null"
		typ := "server_error"
		if status == 400 {
			code, typ = `"context_length_exceeded"`, "invalid_request_error"
		}
		if r.status != status {
			t.Errorf("status %d, want %d", r.status, status)
		}
		wantJSON(t, r.body, `{"error":{"message":"This model's maximum context length is 16384 tokens. However, your messages resulted in 20512 tokens. Please reduce the length of the messages.","type":"`+typ+`","param":null,"code":`+code+`}}`)

		r = sendScript(t, pt.Anthropic, pt.ContextOverflow(status))
		var doc struct{ Error struct{ Message string } }
		if err := json.Unmarshal(r.body, &doc); err != nil || r.status != status || doc.Error.Message != "prompt is too long: 215000 tokens > 200000 maximum" {
			t.Errorf("anthropic %d: %d %s", status, r.status, r.body)
		}
		failure(t, pt.Anthropic, r.body)
	}
}

func TestErrorIn200(t *testing.T) {
	for _, f := range flavors {
		r := sendScript(t, f, pt.ErrorIn200(429))
		if r.status != 200 {
			t.Errorf("%s: status %d, want 200", f, r.status)
		}
		wantJSON(t, r.body, `{"error":{"message":"providertest: scripted 429 Too Many Requests","code":429}}`)
	}
	// The flavour's own document with 200.
	r := sendScript(t, pt.Anthropic, func(int, pt.Request) pt.Reply { return pt.Reply{ErrorStatus: 529} })
	if r.status != 200 || failure(t, pt.Anthropic, r.body) != "overloaded_error" {
		t.Errorf("anthropic 529 in 200: %d %s", r.status, r.body)
	}
}

func TestErrorShapes(t *testing.T) {
	cases := []struct {
		name  string
		reply pt.Reply
		want  string
	}{
		{"string", pt.Reply{Status: 502, ErrorShape: pt.ShapeString, ErrorMessage: "upstream down"}, `{"error":"upstream down"}`},
		{"gateway default code", pt.Reply{Status: 503, ErrorShape: pt.ShapeGateway, ErrorMessage: "m"}, `{"error":{"message":"m","code":503}}`},
		{"gateway string code and type", pt.Reply{Status: 402, ErrorShape: pt.ShapeGateway, ErrorMessage: "m", ErrorCode: "insufficient_balance", ErrorType: "billing"},
			`{"error":{"message":"m","code":"insufficient_balance","type":"billing"}}`},
		{"google with retry delay", pt.Reply{Status: 429, ErrorShape: pt.ShapeGoogle, ErrorMessage: "m", RetryDelay: "30s"},
			`{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`},
		{"google status override", pt.Reply{Status: 500, ErrorShape: pt.ShapeGoogle, ErrorMessage: "m", ErrorType: "UNAVAILABLE"},
			`{"error":{"code":500,"message":"m","status":"UNAVAILABLE","details":[]}}`},
		{"array", pt.Reply{Status: 400, ErrorShape: pt.ShapeGoogle, ErrorArray: true, ErrorMessage: "m"},
			`[{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[]}}]`},
		{"flavour array", pt.Reply{Status: 500, ErrorArray: true, ErrorMessage: "m"},
			`[{"error":{"message":"m","type":"server_error","param":null,"code":null}}]`},
		{"unencodable code is reported", pt.Reply{Status: 500, ErrorCode: func() {}},
			`{"error":{"message":"providertest: ErrorCode: json: unsupported type: func()"}}`},
	}
	for _, c := range cases {
		r := sendScript(t, pt.OpenAI, func(int, pt.Request) pt.Reply { return c.reply })
		if want := max(c.reply.Status, 200); r.status != want {
			t.Errorf("%s: status %d, want %d", c.name, r.status, want)
		}
		wantJSON(t, r.body, c.want)
	}
}

// TestErrorTypeAndCodeOverride: Status(429) can carry insufficient_quota
// in each flavour's own document; Anthropic's has no code.
func TestErrorTypeAndCodeOverride(t *testing.T) {
	script := func(int, pt.Request) pt.Reply {
		return pt.Reply{Status: 429, ErrorType: "insufficient_quota", ErrorCode: "insufficient_quota", ErrorMessage: "m"}
	}
	wantJSON(t, sendScript(t, pt.OpenAI, script).body, `{"error":{"message":"m","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	wantJSON(t, sendScript(t, pt.Anthropic, script).body, `{"type":"error","error":{"type":"insufficient_quota","message":"m"}}`)
	numeric := func(int, pt.Request) pt.Reply { return pt.Reply{Status: 500, ErrorCode: 1008, ErrorMessage: "m"} }
	wantJSON(t, sendScript(t, pt.OpenAI, numeric).body, `{"error":{"message":"m","type":"server_error","param":null,"code":1008}}`)
}

func TestResourceExhausted(t *testing.T) {
	r := sendScript(t, pt.Anthropic, pt.ResourceExhausted("1.5s"))
	if r.status != 429 || !strings.Contains(string(r.body), `"retryDelay":"1.5s"`) || !strings.Contains(string(r.body), "Quota exceeded for metric") {
		t.Errorf("%d %s", r.status, r.body)
	}
	if r := sendScript(t, pt.OpenAI, pt.ResourceExhausted("")); strings.Contains(string(r.body), "RetryInfo") {
		t.Errorf("no retry delay asked, yet %s", r.body)
	}
}

func TestHTMLError(t *testing.T) {
	for _, f := range flavors {
		r := sendScript(t, f, pt.HTMLError(520, "example.com | 520: <Unknown> & error"))
		page := string(r.body)
		if r.status != 520 || r.header.Get("Content-Type") != "text/html; charset=UTF-8" ||
			!strings.HasPrefix(page, "<!DOCTYPE html>") || json.Valid(r.body) ||
			!strings.Contains(page, "<title>example.com | 520: &lt;Unknown&gt; &amp; error</title>") ||
			!strings.Contains(page, "cf-error-details") || !strings.Contains(page, "Ray ID") {
			t.Errorf("%s: %d %q %s", f, r.status, r.header.Get("Content-Type"), page)
		}
		if r := sendScript(t, f, pt.HTMLError(502, "")); r.status != 502 || strings.Contains(string(r.body), "<title") {
			t.Errorf("%s page without a title: %d %s", f, r.status, r.body)
		}
	}
}

func TestContentFilteredAndRefusal(t *testing.T) {
	r := sendScript(t, pt.OpenAI, pt.ContentFiltered("half an"))
	if content, finish := success(t, pt.OpenAI, "m", r.body); content != "half an" || finish != "content_filter" {
		t.Errorf("openai filtered: %q %q", content, finish)
	}
	r = sendScript(t, pt.Anthropic, pt.ContentFiltered("half an"))
	if content, finish := success(t, pt.Anthropic, "m", r.body); content != "half an" || finish != "refusal" {
		t.Errorf("anthropic filtered: %q %q", content, finish)
	}

	r = sendScript(t, pt.OpenAI, pt.Refusal("I can't help with that."))
	var openAI struct {
		Choices []struct {
			Message      map[string]any
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(r.body, &openAI); err != nil || len(openAI.Choices) != 1 {
		t.Fatalf("openai refusal %s: %v", r.body, err)
	}
	msg := openAI.Choices[0].Message
	if content, present := msg["content"]; !present || content != nil || msg["refusal"] != "I can't help with that." || openAI.Choices[0].FinishReason != "stop" {
		t.Errorf("openai refusal: %s", r.body)
	}
	// An ordinary answer says "refusal": null, as the API does.
	r = sendScript(t, pt.OpenAI, pt.Answer("fine"))
	if !strings.Contains(string(r.body), `"refusal":null`) {
		t.Errorf("ordinary answer without refusal null: %s", r.body)
	}

	r = sendScript(t, pt.Anthropic, pt.Refusal("I can't help with that."))
	if content, finish := success(t, pt.Anthropic, "m", r.body); content != "I can't help with that." || finish != "refusal" {
		t.Errorf("anthropic refusal: %q %q", content, finish)
	}
}

// TestWithHeader adds a header without touching the inner script's own.
func TestWithHeader(t *testing.T) {
	inner := pt.RateLimited("2.5")
	s := pt.New(pt.OpenAI, pt.WithHeader("retry-after-ms", "3000", inner))
	defer s.Close()
	r := mustSend(t, s, pt.OpenAI, body(pt.OpenAI, "m", "hi"))
	if r.status != 429 || r.header.Get("Retry-After") != "2.5" || r.header.Get("Retry-After-Ms") != "3000" {
		t.Errorf("status %d headers %v", r.status, r.header)
	}
	if h := inner(1, pt.Request{}).Header; h.Get("Retry-After-Ms") != "" {
		t.Errorf("inner header changed: %v", h)
	}
	if got := pt.WithHeader("X-A", "1", nil)(1, pt.Request{}); got.Header.Get("X-A") != "1" || got.Status != 0 {
		t.Errorf("nil then: %+v", got)
	}
}

// TestReceivedRecordsArrivalAndFlavor: the arrival times show a client's
// wait between retries.
func TestReceivedRecordsArrivalAndFlavor(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, nil)
		before := time.Now()
		mustSend(t, s, f, body(f, "m", "one"))
		time.Sleep(20 * time.Millisecond)
		mustSend(t, s, f, body(f, "m", "two"))
		after := time.Now()
		got := s.Received()
		s.Close()
		if len(got) != 2 || got[0].Flavor != f || got[0].At.Before(before) || got[1].At.After(after) ||
			got[1].At.Sub(got[0].At) < 20*time.Millisecond {
			t.Errorf("%s: %+v", f, got)
		}
	}
}

// TestGatewayFailures: each gateway's failure is the body its source shows.
func TestGatewayFailures(t *testing.T) {
	for _, f := range flavors {
		s := pt.New(f, pt.Moderated("forbidden", "self-harm", nil))
		flagged := mustSend(t, s, f, body(f, "m", "a forbidden question"))
		innocent := mustSend(t, s, f, body(f, "m", "hello"))
		s.Close()
		if flagged.status != 403 || innocent.status != 200 {
			t.Errorf("%s moderated: %d then %d, want 403 then 200", f, flagged.status, innocent.status)
		}
		wantJSON(t, flagged.body, `{"error":{"code":403,"message":"m requires moderation on OpenAI. Your input was flagged for \"self-harm\".",`+
			`"metadata":{"reasons":["self-harm"],"flagged_input":"a forbidden question"}}}`)

		r := sendScript(t, f, pt.KeyInvalid())
		if r.status != 400 {
			t.Errorf("%s key invalid: status %d", f, r.status)
		}
		wantJSON(t, r.body, `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",`+
			`"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}]`)

		r = sendScript(t, f, pt.NoEndpoints())
		if r.status != 404 {
			t.Errorf("%s no endpoints: status %d", f, r.status)
		}
		wantJSON(t, r.body, `{"error":{"message":"No endpoints found for m.","code":404}}`)

		r = sendScript(t, f, pt.ModelLoading(20))
		if r.status != 503 {
			t.Errorf("%s loading: status %d", f, r.status)
		}
		wantJSON(t, r.body, `{"error":"Model m is currently loading","estimated_time":20}`)

		r = sendScript(t, f, pt.DailyLimit(time.UnixMilli(1741305600000)))
		if r.status != 429 {
			t.Errorf("%s daily limit: status %d", f, r.status)
		}
		wantJSON(t, r.body, `{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429,`+
			`"metadata":{"headers":{"X-RateLimit-Limit":"50","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1741305600000"}}}}`)
	}
}
