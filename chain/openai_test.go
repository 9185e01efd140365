package chain_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

const testKey = "sk-SECRET0123456789abcdefghijklmnop"

// callOnce starts a fake OpenAI server answering every request with reply and
// makes one adapter call to it with testKey.
func callOnce(t *testing.T, reply providertest.Reply) (chain.Response, error) {
	t.Helper()
	srv := providertest.New(providertest.OpenAI, func(int, providertest.Request) providertest.Reply { return reply })
	t.Cleanup(srv.Close)
	return chain.NewOpenAI("primary", srv.URL, "gpt-test", testKey, nil).Call(context.Background(), &hello)
}

// wantCallError asserts err is a *chain.CallError and returns it.
func wantCallError(t *testing.T, err error) *chain.CallError {
	t.Helper()
	var ce *chain.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want *chain.CallError", err, err)
	}
	return ce
}

func TestOpenAISendsModelMessagesOptionsAndBearerKey(t *testing.T) {
	srv := providertest.New(providertest.OpenAI, providertest.OK())
	t.Cleanup(srv.Close)
	temperature := 0.2
	req := chain.Request{
		ID: "req-1",
		Messages: []chain.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "hello there"},
		},
		MaxTokens:   64,
		Temperature: &temperature,
	}

	resp, err := chain.NewOpenAI("primary", srv.URL+"/", "gpt-test", testKey, nil).Call(context.Background(), &req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}

	got := srv.Received()
	if len(got) != 1 {
		t.Fatalf("server received %d requests, want 1", len(got))
	}
	sent := got[0]
	if sent.Model != "gpt-test" {
		t.Errorf("model %q, want gpt-test", sent.Model)
	}
	wantMessages := []providertest.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello there"}}
	if !slices.Equal(sent.Messages, wantMessages) {
		t.Errorf("messages %+v, want %+v", sent.Messages, wantMessages)
	}
	if sent.MaxTokens != 64 {
		t.Errorf("max_tokens %d, want 64", sent.MaxTokens)
	}
	if sent.Temperature == nil || *sent.Temperature != 0.2 {
		t.Errorf("temperature %v, want 0.2", sent.Temperature)
	}
	if auth := sent.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization %q, want Bearer <key>", auth)
	}
	if ct := sent.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if resp.Content != "gpt-test answers: hello there" || resp.Model != "gpt-test" || !resp.Complete {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage != (chain.Usage{PromptTokens: 4, CompletionTokens: 4}) {
		t.Errorf("usage %+v, want 4 prompt and 4 completion tokens (providertest counts words)", resp.Usage)
	}
}

// TestOpenAISendsZeroTemperatureButOmitsUnset: temperature 0 is a real
// choice (deterministic answers) and must reach the provider; nil is not sent.
func TestOpenAISendsZeroTemperatureButOmitsUnset(t *testing.T) {
	srv := providertest.New(providertest.OpenAI, providertest.OK())
	t.Cleanup(srv.Close)
	p := chain.NewOpenAI("primary", srv.URL, "gpt-test", "", nil)
	zero := 0.0

	if _, err := p.Call(context.Background(), &chain.Request{Messages: hello.Messages, Temperature: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(context.Background(), &chain.Request{Messages: hello.Messages}); err != nil {
		t.Fatal(err)
	}

	got := srv.Received()
	if got[0].Temperature == nil || *got[0].Temperature != 0 {
		t.Errorf("temperature 0 sent as %v, want 0", got[0].Temperature)
	}
	if got[1].Temperature != nil {
		t.Errorf("unset temperature sent as %v, want absent", *got[1].Temperature)
	}
	if auth := got[1].Header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization %q sent without a key, want none", auth)
	}
}

// TestOpenAIErrorTextNeverShowsAPIKey: providers echo the key they refused;
// that text ends up in results and dead letters, so it must be redacted.
func TestOpenAIErrorTextNeverShowsAPIKey(t *testing.T) {
	tests := map[string]providertest.Reply{
		"openai error message": {Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided: " + testKey + "."},
		"string error body":    {Status: http.StatusUnauthorized, RawBody: `{"error":"bad key ` + testKey + `"}`},
		"plain text body":      {Status: http.StatusForbidden, RawBody: "forbidden for " + testKey},
		// The message is cut short; the cut must not leave half the key.
		"key across the cut": {Status: http.StatusUnauthorized, ErrorMessage: strings.Repeat("x", 290) + testKey},
	}
	for name, reply := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := callOnce(t, reply)
			ce := wantCallError(t, err)
			if ce.Class != chain.Classify(reply.Status) || ce.StatusCode != reply.Status {
				t.Errorf("class %v, status %d; want %v, %d", ce.Class, ce.StatusCode, chain.Classify(reply.Status), reply.Status)
			}
			if text := ce.Error(); strings.Contains(text, testKey[:8]) {
				t.Errorf("error text shows the API key: %q", text)
			}
		})
	}
}

func TestOpenAIStringErrorBodyKeepsStatusAndMessage(t *testing.T) {
	tests := []struct {
		status int
		body   string
		class  chain.Class
		want   string
	}{
		{http.StatusServiceUnavailable, `{"error":"model is overloaded"}`, chain.ClassServer, "model is overloaded"},
		{http.StatusBadRequest, `{"error":"messages must not be empty"}`, chain.ClassRequest, "messages must not be empty"},
		// A page without a <title> is never repeated, only named.
		{http.StatusBadGateway, `<html>bad gateway</html>`, chain.ClassServer, "HTTP 502): HTML error page"},
	}
	for _, tt := range tests {
		_, err := callOnce(t, providertest.Reply{Status: tt.status, RawBody: tt.body})
		ce := wantCallError(t, err)
		if ce.StatusCode != tt.status || ce.Class != tt.class {
			t.Errorf("%s: status %d, class %v; want %d, %v", tt.body, ce.StatusCode, ce.Class, tt.status, tt.class)
		}
		if !strings.Contains(ce.Error(), tt.want) {
			t.Errorf("%s: error %q does not contain %q", tt.body, ce.Error(), tt.want)
		}
	}
}

func TestOpenAIOpenAIShapedErrorKeepsMessage(t *testing.T) {
	_, err := callOnce(t, providertest.Reply{Status: http.StatusNotFound, ErrorMessage: "The model gpt-test does not exist"})
	ce := wantCallError(t, err)
	if ce.Class != chain.ClassServer || ce.StatusCode != http.StatusNotFound {
		t.Errorf("class %v, status %d; want server (a bare 404 is counted), 404", ce.Class, ce.StatusCode)
	}
	if !strings.Contains(ce.Error(), "The model gpt-test does not exist") {
		t.Errorf("error %q lost the provider's message", ce.Error())
	}
}

// TestOpenAILongErrorMessageStaysValidUTF8: the message is cut short; the cut
// must not split a multi-byte character, or results carry invalid UTF-8.
func TestOpenAILongErrorMessageStaysValidUTF8(t *testing.T) {
	_, err := callOnce(t, providertest.Reply{Status: http.StatusInternalServerError, ErrorMessage: strings.Repeat("x", 299) + strings.Repeat("天气", 50)})
	ce := wantCallError(t, err)
	if text := ce.Error(); !utf8.ValidString(text) {
		t.Errorf("error text is not valid UTF-8: %q", text)
	}
	if len(ce.Error()) > 400 {
		t.Errorf("error text is %d bytes, want it cut short", len(ce.Error()))
	}
}

func TestOpenAIRetryAfterSeconds(t *testing.T) {
	_, err := callOnce(t, providertest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"17"}}})
	ce := wantCallError(t, err)
	if ce.Class != chain.ClassRateLimit || ce.RetryAfter != 17*time.Second {
		t.Errorf("class %v, RetryAfter %v; want rate_limit, 17s", ce.Class, ce.RetryAfter)
	}
}

func TestOpenAIRetryAfterHTTPDate(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	_, err := callOnce(t, providertest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {date}}})
	ce := wantCallError(t, err)
	// The date has whole seconds and the call takes a moment: allow slack
	// below, none above.
	if ce.Class != chain.ClassRateLimit || ce.RetryAfter < 25*time.Second || ce.RetryAfter > 30*time.Second {
		t.Errorf("class %v, RetryAfter %v; want rate_limit, about 30s", ce.Class, ce.RetryAfter)
	}
}

func TestOpenAIMalformedBodyIsInvalidOutput(t *testing.T) {
	srv := providertest.New(providertest.OpenAI, providertest.Malformed())
	t.Cleanup(srv.Close)
	_, err := chain.NewOpenAI("primary", srv.URL, "gpt-test", testKey, nil).Call(context.Background(), &hello)
	if ce := wantCallError(t, err); ce.Class != chain.ClassInvalidOutput {
		t.Errorf("class %v, want invalid_output", ce.Class)
	}
}

func TestOpenAITruncatedAnswerIsFlagged(t *testing.T) {
	srv := providertest.New(providertest.OpenAI, providertest.Truncated())
	t.Cleanup(srv.Close)
	resp, err := chain.NewOpenAI("primary", srv.URL, "gpt-test", testKey, nil).Call(context.Background(), &hello)
	if err != nil || resp.Complete || resp.StopReason != "length" {
		t.Errorf("Call = %+v, %v; want a response that is not complete, stopped for length", resp, err)
	}
}
