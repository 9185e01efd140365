package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// sentKey is the API key a request carried, in either flavour's header.
func sentKey(req providertest.Request) string {
	if k := req.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
}

// jsonEscaped spells every byte of s as a \u escape, as a JSON encoder may.
func jsonEscaped(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	return b.String()
}

// TestProviderTextNeverShowsAPIKey: whatever a provider sends back reaches
// results, dead letters, logs and metric labels, so an endpoint that echoes
// the key it was sent (a gateway echoing the request, a hostile one) must
// not get it there, in an answer or in an error, spelled plainly or with
// JSON escapes.
func TestProviderTextNeverShowsAPIKey(t *testing.T) {
	schema, err := chain.CompileSchema(map[string]any{"type": "string", "pattern": "^ok$"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		reply  func(key string) providertest.Reply
		schema *chain.Schema
	}{
		{name: "refusal", reply: func(key string) providertest.Reply { return providertest.Reply{Refusal: "I refuse " + key} }},
		{name: "model", reply: func(key string) providertest.Reply { return providertest.Reply{Content: "fine", Model: "m-" + key} }},
		{name: "stop reason", reply: func(key string) providertest.Reply {
			return providertest.Reply{Content: "fine", FinishReason: key}
		}},
		{name: "answer", reply: func(key string) providertest.Reply { return providertest.Reply{Content: "your key is " + key} }},
		{name: "answer failing the schema", schema: schema, reply: func(key string) providertest.Reply {
			return providertest.Reply{Content: `"` + key + `"`}
		}},
		{name: "escaped in an error body", reply: func(key string) providertest.Reply {
			return providertest.Reply{Status: http.StatusInternalServerError, RawBody: `{"detail": "bad key ` + jsonEscaped(key) + `"}`}
		}},
		{name: "escaped in an error array", reply: func(key string) providertest.Reply {
			return providertest.Reply{Status: http.StatusForbidden, RawBody: `["denied", "` + jsonEscaped(key) + `"]`}
		}},
		{name: "plain and escaped in one error body", reply: func(key string) providertest.Reply {
			return providertest.Reply{Status: http.StatusUnauthorized, RawBody: `{"detail":"key ` + key + `","echo":"` + jsonEscaped(key) + `"}`}
		}},
		// Not JSON at all, so not to be parsed, yet spelled with escapes.
		{name: "escaped in a text body", reply: func(key string) providertest.Reply {
			return providertest.Reply{Status: http.StatusBadGateway, RawBody: `upstream said: ` + jsonEscaped(key) + ` {unbalanced`}
		}},
		{name: "escaped slash", reply: func(key string) providertest.Reply {
			return providertest.Reply{Status: http.StatusBadRequest, RawBody: `{"detail":"` + strings.ReplaceAll(key, "-", `\u002d`) + `\/x"}`}
		}},
	}
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for _, tt := range tests {
			if flavor == providertest.Anthropic && tt.name == "refusal" {
				continue // a stop reason there: the refusal's text is not shown
			}
			t.Run(flavor.String()+"/"+tt.name, func(t *testing.T) {
				p, srv := adapterFor(t, flavor, func(_ int, req providertest.Request) providertest.Reply { return tt.reply(sentKey(req)) })
				req := hello
				req.Schema = tt.schema
				res, err := newChain(newMemState(), chain.Step{Provider: p, Policy: chain.Policy{}}).Run(context.Background(), &req)
				if srv.Requests() != 1 {
					t.Fatalf("the provider received %d requests, want 1", srv.Requests())
				}
				data, jerr := json.Marshal(res)
				if jerr != nil {
					t.Fatal(jerr)
				}
				seen := string(data)
				if err != nil {
					seen += "\n" + err.Error()
				}
				if strings.Contains(seen, testKey[3:]) || strings.Contains(seen, jsonEscaped(testKey[3:])) {
					t.Errorf("the key shows:\n%s", seen)
				}
				if !strings.Contains(seen, "[redacted]") {
					t.Errorf("no [redacted] where the provider echoed the key:\n%s", seen)
				}
			})
		}
	}
}

// TestBaseURLQueryIsKeptAndNotShown: a base_url may carry a query, as Azure
// OpenAI's api-version: calls go to the endpoint's path under the base
// path, with the query. A transport error names the URL without the query's
// values, which may be secrets.
func TestBaseURLQueryIsKeptAndNotShown(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		srv := providertest.New(flavor, providertest.OK())
		t.Cleanup(srv.Close)
		base := srv.URL + "/?api-version=2024-02-01"
		var p chain.Provider = chain.NewOpenAI("primary", base, "m", testKey, nil)
		if flavor == providertest.Anthropic {
			p = chain.NewAnthropic("primary", base, "m", testKey, nil)
		}
		if _, err := p.Call(context.Background(), &hello); err != nil {
			t.Fatalf("%s: %v", flavor, err)
		}
		if got := srv.Received()[0].Query.Get("api-version"); got != "2024-02-01" {
			t.Errorf("%s: api-version %q reached the provider, want 2024-02-01", flavor, got)
		}
	}
	dead := chain.NewOpenAI("primary", "http://127.0.0.1:1/v1?key=QUERYSECRET", "m", testKey, nil)
	_, err := dead.Call(context.Background(), &hello)
	if err == nil || strings.Contains(err.Error(), "QUERYSECRET") || !strings.Contains(err.Error(), "127.0.0.1:1/v1/chat/completions") {
		t.Errorf("error %v, want the endpoint named without the query's values", err)
	}
}
