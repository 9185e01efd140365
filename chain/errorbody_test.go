package chain_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

var (
	bothFlavors   = []providertest.Flavor{providertest.OpenAI, providertest.Anthropic}
	openAIOnly    = []providertest.Flavor{providertest.OpenAI}
	anthropicOnly = []providertest.Flavor{providertest.Anthropic}
)

// adapterFor starts a fake server of flavour f running script and returns
// that flavour's adapter pointed at it, with testKey.
func adapterFor(t *testing.T, f providertest.Flavor, script providertest.Script) (chain.Provider, *providertest.Server) {
	t.Helper()
	srv := providertest.New(f, script)
	t.Cleanup(srv.Close)
	if f == providertest.Anthropic {
		return chain.NewAnthropic("p", srv.URL, "m", testKey, nil), srv
	}
	return chain.NewOpenAI("p", srv.URL, "m", testKey, nil), srv
}

// callFlavor makes one call through flavour f's adapter to a server
// running script.
func callFlavor(t *testing.T, f providertest.Flavor, script providertest.Script) (chain.Response, error) {
	t.Helper()
	p, _ := adapterFor(t, f, script)
	return p.Call(context.Background(), &hello)
}

// reply is a script answering every request with r.
func reply(r providertest.Reply) providertest.Script {
	return func(int, providertest.Request) providertest.Reply { return r }
}

// bodyCase is one error body and the failure the adapters must make of it.
type bodyCase struct {
	name    string
	flavors []providertest.Flavor
	script  providertest.Script
	class   chain.Class
	status  int
	keep    []string // in the error text
	hide    []string // never in the error text
}

// TestErrorBodyClassTable runs every row of the body table (chain's
// bodyRules, docs/failures.md's "Reading the error body") through both adapters
// against the real fake server: the class, the status code kept, the
// upstream message kept, and what must never be repeated.
func TestErrorBodyClassTable(t *testing.T) {
	cases := []bodyCase{
		// Billing: auth whatever the status.
		{name: "out of credit, openai 429 insufficient_quota", flavors: openAIOnly, script: providertest.OutOfCredit(),
			class: chain.ClassAuth, status: 429, keep: []string{"You exceeded your current quota"}},
		{name: "out of credit, anthropic 400 credit balance", flavors: anthropicOnly, script: providertest.OutOfCredit(),
			class: chain.ClassAuth, status: 400, keep: []string{"credit balance is too low"}},
		{name: "429 typed billing_hard_limit_reached", script: reply(providertest.Reply{Status: 429, ErrorType: "billing_hard_limit_reached", ErrorMessage: "Billing hard limit has been reached"}),
			class: chain.ClassAuth, status: 429, keep: []string{"Billing hard limit"}},
		{name: "503 string body Insufficient Balance", script: reply(providertest.Reply{Status: 503, ErrorShape: providertest.ShapeString, ErrorMessage: "Insufficient Balance"}),
			class: chain.ClassAuth, status: 503, keep: []string{"Insufficient Balance"}},
		{name: "200 gateway code billing_not_active", script: reply(providertest.Reply{ErrorStatus: 403, ErrorShape: providertest.ShapeGateway, ErrorCode: "billing_not_active", ErrorMessage: "Your account is not active"}),
			class: chain.ClassAuth, status: 200, keep: []string{"billing_not_active", "Your account is not active"}},
		// What says quota but is a rate limit.
		{name: "google per-minute quota is a rate limit", script: providertest.ResourceExhausted("30s"),
			class: chain.ClassRateLimit, status: 429, keep: []string{"Quota exceeded for metric"}},
		{name: "openai tokens-per-minute message linking billing", flavors: openAIOnly, script: reply(providertest.Reply{Status: 429, ErrorMessage: openAITPMMessage}),
			class: chain.ClassRateLimit, status: 429, keep: []string{"Rate limit reached"}},
		{name: "bare 429 with the quota words stays a rate limit", script: reply(providertest.Reply{Status: 429, ErrorShape: providertest.ShapeString, ErrorMessage: "You exceeded your current quota, please check your plan and billing details."}),
			class: chain.ClassRateLimit, status: 429},
		// Context overflow: request whatever the status.
		{name: "overflow 400", script: providertest.ContextOverflow(400), class: chain.ClassRequest, status: 400},
		{name: "overflow 500", script: providertest.ContextOverflow(500), class: chain.ClassRequest, status: 500},
		{name: "openai overflow message kept", flavors: openAIOnly, script: providertest.ContextOverflow(500),
			class: chain.ClassRequest, status: 500, keep: []string{"maximum context length is 16384 tokens"}},
		{name: "anthropic overflow message kept", flavors: anthropicOnly, script: providertest.ContextOverflow(500),
			class: chain.ClassRequest, status: 500, keep: []string{"prompt is too long: 215000 tokens > 200000 maximum"}},
		{name: "gemini array, input token count", script: reply(providertest.Reply{Status: 400, ErrorShape: providertest.ShapeGoogle, ErrorArray: true,
			ErrorMessage: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}),
			class: chain.ClassRequest, status: 400, keep: []string{"input token count"}},
		{name: "overflow named in a 200 beats its 503 code", script: reply(providertest.Reply{ErrorStatus: 503, ErrorShape: providertest.ShapeGateway, ErrorMessage: "context window exceeded"}),
			class: chain.ClassRequest, status: 200},
		// Error objects inside a 2xx answer: a numeric code goes through Classify.
		{name: "200 code 429", script: providertest.ErrorIn200(429), class: chain.ClassRateLimit, status: 200, keep: []string{"code 429", "scripted 429 Too Many Requests"}},
		{name: "200 code 503", script: providertest.ErrorIn200(503), class: chain.ClassServer, status: 200, keep: []string{"code 503"}},
		{name: "200 code 401", script: providertest.ErrorIn200(401), class: chain.ClassAuth, status: 200},
		{name: "200 code 400", script: providertest.ErrorIn200(400), class: chain.ClassRequest, status: 200},
		{name: "200 code 408", script: providertest.ErrorIn200(408), class: chain.ClassTimeout, status: 200},
		{name: "200 code as a string of digits", script: reply(providertest.Reply{ErrorStatus: 502, ErrorShape: providertest.ShapeGateway, ErrorCode: "429"}),
			class: chain.ClassRateLimit, status: 200},
		{name: "200 array of google errors", script: reply(providertest.Reply{ErrorStatus: 429, ErrorShape: providertest.ShapeGoogle, ErrorArray: true}),
			class: chain.ClassRateLimit, status: 200, keep: []string{"code 429"}},
		// ... and names by the table.
		{name: "200 flavour rate limit names", script: reply(providertest.Reply{ErrorStatus: 429}), class: chain.ClassRateLimit, status: 200},
		{name: "200 flavour overloaded", script: reply(providertest.Reply{ErrorStatus: 529}), class: chain.ClassServer, status: 200},
		{name: "200 gateway timeout name", script: reply(providertest.Reply{ErrorStatus: 200, ErrorShape: providertest.ShapeGateway, ErrorCode: "DEADLINE_EXCEEDED"}),
			class: chain.ClassTimeout, status: 200},
		{name: "200 flavour not found is counted", script: reply(providertest.Reply{ErrorStatus: 404}), class: chain.ClassServer, status: 200},
		{name: "200 flavour invalid request", script: reply(providertest.Reply{ErrorStatus: 400}), class: chain.ClassRequest, status: 200},
		{name: "200 anthropic request_too_large", flavors: anthropicOnly, script: reply(providertest.Reply{ErrorStatus: 413}),
			class: chain.ClassRequest, status: 200},
		{name: "200 unknown code", script: reply(providertest.Reply{ErrorStatus: 200, ErrorShape: providertest.ShapeGateway, ErrorCode: "something_odd", ErrorMessage: "odd"}),
			class: chain.ClassServer, status: 200, keep: []string{"something_odd", "odd"}},
		{name: "200 string error", script: reply(providertest.Reply{ErrorStatus: 500, ErrorShape: providertest.ShapeString, ErrorMessage: "upstream exploded"}),
			class: chain.ClassServer, status: 200, keep: []string{"upstream exploded"}},
		// Gateways' bodies decide whatever the status.
		{name: "openrouter flagged input is the request's", script: providertest.Moderated("hello", "self-harm", nil),
			class: chain.ClassRequest, status: 403, keep: []string{"Your input was flagged"}},
		{name: "gemini invalid key is auth", script: providertest.KeyInvalid(), class: chain.ClassAuth, status: 400, keep: []string{"API key not valid"}},
		{name: "openrouter no endpoints is counted", script: providertest.NoEndpoints(), class: chain.ClassServer, status: 404, keep: []string{"No endpoints found for m"}},
		{name: "hugging face loading is counted", script: providertest.ModelLoading(20), class: chain.ClassServer, status: 503, keep: []string{"is currently loading"}},
		{name: "overloaded with a 400 is counted", script: reply(providertest.Reply{Status: 400, ErrorShape: providertest.ShapeString, ErrorMessage: "our servers are currently overloaded. Please try again later"}),
			class: chain.ClassServer, status: 400},
		{name: "bare 403 text is counted", script: reply(providertest.Reply{Status: 403, ErrorShape: providertest.ShapeString, ErrorMessage: "Forbidden"}),
			class: chain.ClassServer, status: 403},
		{name: "openrouter daily limit stays a rate limit", script: providertest.DailyLimit(time.Now().Add(time.Hour)), class: chain.ClassRateLimit, status: 429},
		// For any other non-2xx status, the status's class stands.
		{name: "429 stays rate_limit", script: providertest.Status(429), class: chain.ClassRateLimit, status: 429},
		{name: "bare 404 is counted like a server failure", script: providertest.Status(404), class: chain.ClassServer, status: 404},
		{name: "bare 403 is counted like a server failure", script: providertest.Status(403), class: chain.ClassServer, status: 403},
		{name: "bare 402 is counted like a server failure", script: providertest.Status(402), class: chain.ClassServer, status: 402},
		{name: "400 typed server_error stays request", script: reply(providertest.Reply{Status: 400, ErrorType: "server_error"}), class: chain.ClassRequest, status: 400},
		// HTML pages: the status and the title, never the page.
		{name: "cloudflare 520", script: providertest.HTMLError(520, "example.com | 520: Web server is returning an unknown error"),
			class: chain.ClassServer, status: 520, keep: []string{"HTTP 520): example.com | 520: Web server is returning an unknown error"}},
		{name: "title unescaped and collapsed", script: providertest.HTMLError(502, "  502 Bad\n\tGateway &  more "),
			class: chain.ClassServer, status: 502, keep: []string{"HTTP 502): 502 Bad Gateway & more"}},
		{name: "page without a title", script: providertest.HTMLError(503, ""),
			class: chain.ClassServer, status: 503, keep: []string{"HTTP 503): HTML error page"}},
		{name: "html 401 stays auth", script: providertest.HTMLError(401, "401 Authorization Required"), class: chain.ClassAuth, status: 401},
		// Bytes that are not UTF-8 before the title once moved it (and
		// could cut out of range: a panic in the worker).
		{name: "title after bytes that are not UTF-8", script: reply(providertest.Reply{Status: 502,
			RawBody: "<html>\xda\xda\xda\xda<title>502 Bad Gateway</title></html>"}),
			class: chain.ClassServer, status: 502, keep: []string{"HTTP 502): 502 Bad Gateway"}},
		// A byte order mark before a body (RFC 8259, section 8.1, lets a
		// reader ignore one) hides neither a page's title nor an error object.
		{name: "html page after a byte order mark", script: reply(providertest.Reply{Status: 502,
			RawBody: "\ufeff<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>" + strings.Repeat("x", 400) + "</body></html>"}),
			class: chain.ClassServer, status: 502, keep: []string{"HTTP 502): 502 Bad Gateway"}},
		{name: "error object after a byte order mark", script: reply(providertest.Reply{Status: 400,
			RawBody: "\ufeff" + `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`}),
			class: chain.ClassAuth, status: 400, keep: []string{"You exceeded your current quota"}},
		// A body the transport cannot decode: the status still classes it.
		{name: "503 with a body that is not the gzip it says", script: reply(providertest.Reply{Status: 503,
			Header: http.Header{"Content-Encoding": {"gzip"}}, RawBody: "not gzip at all"}),
			class: chain.ClassServer, status: 503, keep: []string{"HTTP 503"}},
		// The key is redacted in every new text.
		{name: "key in a 200 error", script: reply(providertest.Reply{ErrorStatus: 401, ErrorShape: providertest.ShapeGateway, ErrorMessage: "bad key " + testKey}),
			class: chain.ClassAuth, status: 200, keep: []string{"[redacted]"}},
		{name: "key in an html title", script: providertest.HTMLError(403, "denied for "+testKey), class: chain.ClassServer, status: 403, keep: []string{"[redacted]"}},
	}
	for _, tc := range cases {
		flavors := tc.flavors
		if flavors == nil {
			flavors = bothFlavors
		}
		for _, f := range flavors {
			t.Run(f.String()+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				resp, err := callFlavor(t, f, tc.script)
				if err == nil {
					t.Fatalf("Call answered %+v, want a %s failure", resp, tc.class)
				}
				ce := wantCallError(t, err)
				if ce.Class != tc.class || ce.StatusCode != tc.status {
					t.Errorf("class %s, status %d; want %s, %d (%v)", ce.Class, ce.StatusCode, tc.class, tc.status, ce)
				}
				text := ce.Error()
				for _, want := range tc.keep {
					if !strings.Contains(text, want) {
						t.Errorf("error %q does not keep %q", text, want)
					}
				}
				for _, never := range append(tc.hide, testKey[:8], "<", "cf-error-details", "Ray ID") {
					if strings.Contains(text, never) {
						t.Errorf("error %q repeats %q", text, never)
					}
				}
			})
		}
	}
}

// TestUnreadableAnswerIsInvalidOutput: a 2xx whose body cannot be read as
// an answer is invalid_output, not an outage: the provider answered, and
// calling it again would pay again for the same body. The error says what
// was wrong with it.
func TestUnreadableAnswerIsInvalidOutput(t *testing.T) {
	huge := `{"choices":[{"message":{"content":"` + strings.Repeat("a", 8<<20) + `"}}]}`
	for name, tt := range map[string]struct {
		reply providertest.Reply
		keep  string
	}{
		"not the gzip it says": {providertest.Reply{Header: http.Header{"Content-Encoding": {"gzip"}}, RawBody: "not gzip at all"},
			"malformed answer body: gzip: invalid header"},
		"over 8 MiB": {providertest.Reply{RawBody: huge}, "answer body over 8 MiB"},
	} {
		for _, f := range bothFlavors {
			t.Run(f.String()+"/"+name, func(t *testing.T) {
				_, err := callFlavor(t, f, reply(tt.reply))
				ce := wantCallError(t, err)
				if ce.Class != chain.ClassInvalidOutput || ce.StatusCode != 200 || !strings.Contains(ce.Error(), tt.keep) {
					t.Errorf("class %s, status %d, error %q; want invalid_output, 200, %q", ce.Class, ce.StatusCode, ce.Error(), tt.keep)
				}
			})
		}
	}
}

// TestAnswerAfterAByteOrderMarkIsRead: RFC 8259 (section 8.1) lets a
// reader ignore a byte order mark before a JSON text; a gateway that sends
// one has still answered.
func TestAnswerAfterAByteOrderMarkIsRead(t *testing.T) {
	bodies := map[providertest.Flavor]string{
		providertest.OpenAI:    `{"model":"m","choices":[{"message":{"content":"fine"},"finish_reason":"stop"}]}`,
		providertest.Anthropic: `{"model":"m","content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn"}`,
	}
	for f, body := range bodies {
		t.Run(f.String(), func(t *testing.T) {
			resp, err := callFlavor(t, f, reply(providertest.Reply{RawBody: "\ufeff" + body}))
			if err != nil || resp.Content != "fine" {
				t.Errorf("Call = %+v, %v; want the answer \"fine\"", resp, err)
			}
		})
	}
}

// openAITPMMessage is OpenAI's tokens-per-minute 429: it links the billing
// page and names its wait, and is a rate limit all the same.
const openAITPMMessage = "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. " +
	"Please try again in 2s. Visit https://platform.openai.com/account/rate-limits to learn more. " +
	"You can increase your rate limit by adding a payment method to your account at https://platform.openai.com/account/billing."

// TestErrorBesideAnAnswerIsAnAnswer: a gateway that adds an error object to
// a real answer (a warning, a null) has answered.
func TestErrorBesideAnAnswerIsAnAnswer(t *testing.T) {
	bodies := map[providertest.Flavor][]string{
		providertest.OpenAI: {
			`{"model":"m","choices":[{"message":{"content":"fine"},"finish_reason":"stop"}],"error":{"message":"ignored","code":500}}`,
			`{"model":"m","choices":[{"message":{"content":"fine","refusal":""},"finish_reason":"stop"}],"error":null}`,
		},
		providertest.Anthropic: {
			`{"model":"m","content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn","error":{"type":"api_error","message":"ignored"}}`,
		},
	}
	for f, list := range bodies {
		for _, body := range list {
			resp, err := callFlavor(t, f, reply(providertest.Reply{RawBody: body}))
			if err != nil || resp.Content != "fine" || resp.Refusal != "" {
				t.Errorf("%s %s: Call = %+v, %v; want the answer", f, body, resp, err)
			}
		}
	}
	// "error": null or {} beside an empty answer says nothing: the answer is
	// empty, which the chain rejects as invalid_output.
	for _, body := range []string{`{"choices":[{"message":{"content":""}}],"error":null}`, `{"choices":[],"error":{}}`} {
		resp, err := callFlavor(t, providertest.OpenAI, reply(providertest.Reply{RawBody: body}))
		if err != nil || resp.Content != "" {
			t.Errorf("%s: Call = %+v, %v; want an empty answer, no failure", body, resp, err)
		}
	}
}

// TestHTMLAnswerWith200IsMalformedNotRepeated: a captive portal's page
// with 200 is a malformed answer; the page does not reach the error text.
func TestHTMLAnswerWith200IsMalformedNotRepeated(t *testing.T) {
	page := `<!DOCTYPE html><html><head><title>Login</title></head><body>cf-error-details</body></html>`
	for _, f := range bothFlavors {
		_, err := callFlavor(t, f, reply(providertest.Reply{RawBody: page, Header: http.Header{"Content-Type": {"text/html"}}}))
		ce := wantCallError(t, err)
		if ce.Class != chain.ClassInvalidOutput || strings.Contains(ce.Error(), "cf-error-details") {
			t.Errorf("%s: %v; want invalid_output without the page", f, ce)
		}
	}
}
