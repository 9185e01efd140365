package chain_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestWriteCheckGolden: the table's columns are named by sample, and an
// answer that is not JSON where a schema asks for it says so in those
// words, with the answer's start, not in the JSON parser's.
func TestWriteCheckGolden(t *testing.T) {
	srv := providertest.New(providertest.OpenAI, providertest.JSON(map[string]any{"answer": "yes"}))
	defer srv.Close()
	down := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer down.Close()
	schema, err := chain.CompileSchema(map[string]any{"type": "object", "required": []any{"answer"}})
	if err != nil {
		t.Fatal(err)
	}
	user := []chain.Message{{Role: "user", Content: "hello"}}
	samples := []chain.Request{
		{ID: "greeting", Messages: user},
		{ID: "line 3", Messages: user, Schema: schema},
	}
	steps := []chain.Step{
		{Provider: chain.NewOpenAI("structured", srv.URL, "m-json", "", nil)},
		{Provider: chain.NewOpenAI("down", down.URL, "m-down", "", nil)},
		{Provider: chain.NewRules("template", nil, "Sorry, the assistant cannot answer in JSON right now; please try again later.")},
	}
	results := chain.Check(context.Background(), steps, samples)
	for i := range results {
		results[i].LatencyMs = 7 // a stable table
	}
	var out bytes.Buffer
	if err := chain.WriteCheck(&out, results, len(samples)); !errors.Is(err, chain.ErrCheckFailed) {
		t.Errorf("WriteCheck() = %v, want ErrCheckFailed", err)
	}
	const want = `PROVIDER    MODEL   greeting     line 3
structured  m-json  ok 7ms       ok 7ms
down        m-down  FAIL server  FAIL server
template    rules   ok 7ms       FAIL invalid_output
down on greeting: server (HTTP 500): providertest: scripted 500 Internal Server Error
down on line 3: server (HTTP 500): providertest: scripted 500 Internal Server Error
template on line 3: invalid_output: answer is not JSON; it begins "Sorry, the assistant cannot answer in JS…"
`
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestCheckNamesSamplesWithoutID: a sample without an ID is named by its
// place, from 1.
func TestCheckNamesSamplesWithoutID(t *testing.T) {
	steps := []chain.Step{{Provider: chain.NewRules("template", nil, "ok")}}
	results := chain.Check(context.Background(), steps, []chain.Request{
		{Messages: []chain.Message{{Role: "user", Content: "a"}}},
		{ID: "b", Messages: []chain.Message{{Role: "user", Content: "b"}}},
	})
	if len(results) != 2 || results[0].Sample != "#1" || results[1].Sample != "b" {
		t.Fatalf("results %+v", results)
	}
}
