package chain_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// anthropicSent makes one call through the Anthropic adapter (API key key,
// model "claude-test") to a fake Anthropic server and returns the response
// and the one request the server received.
func anthropicSent(t *testing.T, key string, req chain.Request) (chain.Response, providertest.Request) {
	t.Helper()
	srv := providertest.New(providertest.Anthropic, providertest.OK())
	t.Cleanup(srv.Close)

	resp, err := chain.NewAnthropic("primary", srv.URL+"/", "claude-test", key, nil).Call(context.Background(), &req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	// The server counts only POSTs to /v1/messages and answers anything
	// else with 404, so one counted request is the path check.
	if n := srv.Requests(); n != 1 {
		t.Fatalf("server counted %d requests on /v1/messages, want 1", n)
	}
	got := srv.Received()
	if len(got) != 1 {
		t.Fatalf("server received %d requests, want 1", len(got))
	}
	return resp, got[0]
}

// bodyFields decodes the top level of a JSON request body.
func bodyFields(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("request body %s is not a JSON object: %v", body, err)
	}
	return fields
}

// wantKeys asserts the body's top-level keys are exactly want.
func wantKeys(t *testing.T, fields map[string]json.RawMessage, want ...string) {
	t.Helper()
	got := slices.Sorted(maps.Keys(fields))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("body keys %q, want %q", got, want)
	}
}

func TestAnthropicSendsKeyVersionAndMessagesBody(t *testing.T) {
	temperature := 0.2
	req := chain.Request{
		ID: "req-1",
		Messages: []chain.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "hello there"},
			{Role: "assistant", Content: "hi"},
			{Role: "system", Content: "answer in French"},
			{Role: "user", Content: "how are you"},
		},
		MaxTokens:   64,
		Temperature: &temperature,
	}

	resp, sent := anthropicSent(t, testKey, req)

	if got := sent.Header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key %q, want the API key", got)
	}
	if got := sent.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version %q, want 2023-06-01", got)
	}
	if got, ok := sent.Header["Authorization"]; ok {
		t.Errorf("Authorization %q sent, want none: Anthropic takes the key in x-api-key", got)
	}
	if got := sent.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q, want application/json", got)
	}

	fields := bodyFields(t, sent.Body)
	wantKeys(t, fields, "model", "max_tokens", "system", "messages", "temperature")
	var body struct {
		Model       string          `json:"model"`
		MaxTokens   int             `json:"max_tokens"`
		System      string          `json:"system"` // a string, not blocks
		Messages    []chain.Message `json:"messages"`
		Temperature float64         `json:"temperature"`
	}
	if err := json.Unmarshal(sent.Body, &body); err != nil {
		t.Fatalf("request body %s: %v", sent.Body, err)
	}
	if body.Model != "claude-test" || body.MaxTokens != 64 || body.Temperature != 0.2 {
		t.Errorf("model %q, max_tokens %d, temperature %v; want claude-test, 64, 0.2", body.Model, body.MaxTokens, body.Temperature)
	}
	// System messages leave the conversation for the top-level field, in
	// order, wherever they stood.
	if body.System != "be brief\n\nanswer in French" {
		t.Errorf("system %q, want both system messages joined by a blank line", body.System)
	}
	wantMessages := []chain.Message{
		{Role: "user", Content: "hello there"},
		{Role: "assistant", Content: "hi"},
		{Role: "user", Content: "how are you"},
	}
	if !slices.Equal(body.Messages, wantMessages) {
		t.Errorf("messages %+v, want %+v", body.Messages, wantMessages)
	}

	if resp.Content != "claude-test answers: how are you" || resp.Model != "claude-test" || !resp.Complete || resp.StopReason != "end_turn" {
		t.Errorf("response %+v", resp)
	}
	// providertest counts words: 2+3 system, 2+1+3 messages; 5 answered.
	if resp.Usage != (chain.Usage{PromptTokens: 11, CompletionTokens: 5}) {
		t.Errorf("usage %+v, want 11 prompt and 5 completion tokens", resp.Usage)
	}
}

// TestAnthropicFillsMaxTokensAndOmitsWhatIsUnset: the Messages API refuses a
// request without max_tokens, so the adapter fills it; an empty system prompt
// and an unset temperature are not sent.
func TestAnthropicFillsMaxTokensAndOmitsWhatIsUnset(t *testing.T) {
	_, sent := anthropicSent(t, testKey, hello)

	fields := bodyFields(t, sent.Body)
	wantKeys(t, fields, "model", "max_tokens", "messages")
	if got := string(fields["max_tokens"]); got != "1024" {
		t.Errorf("max_tokens %s, want the default 1024", got)
	}
}

// TestAnthropicSendsZeroTemperature: temperature 0 is a real choice
// (deterministic answers) and must reach the provider.
func TestAnthropicSendsZeroTemperature(t *testing.T) {
	zero := 0.0

	_, sent := anthropicSent(t, testKey, chain.Request{Messages: hello.Messages, Temperature: &zero})

	if got, ok := bodyFields(t, sent.Body)["temperature"]; !ok || string(got) != "0" {
		t.Errorf("temperature %s (sent %v), want 0", got, ok)
	}
}

// TestAnthropicSendsNoKeyHeaderWithoutKey: a provider configured without a
// key (a local gateway) gets no x-api-key at all, not an empty one.
func TestAnthropicSendsNoKeyHeaderWithoutKey(t *testing.T) {
	_, sent := anthropicSent(t, "", hello)

	if got, ok := sent.Header["X-Api-Key"]; ok {
		t.Errorf("x-api-key %q sent without a key, want none", got)
	}
	if got := sent.Header.Get("Anthropic-Version"); got != "2023-06-01" {
		t.Errorf("anthropic-version %q, want 2023-06-01", got)
	}
}
