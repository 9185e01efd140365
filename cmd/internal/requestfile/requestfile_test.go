package requestfile_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/internal/requestfile"
	"github.com/detourhq/detour/wire"
)

func TestReadRequestsAcceptsTheRequestShapeAndPrompts(t *testing.T) {
	file := "\ufeff" + `{"id":"a-1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":20,"metadata":{"tenant":"acme"}}
{"prompt":"just a prompt","temperature":0.5}

   
{"id":"a-3","prompt":"with crlf","response_schema":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}}` + "\r\n" +
		`{"messages":[{"role":"user","content":"no newline at the end"}],"deadline":"2030-01-01T00:00:00Z"}`
	reqs, err := requestfile.Read(strings.NewReader(file), "good.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	half := 0.5
	want := []wire.Request{
		{ID: "a-1", Messages: []chain.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
			MaxTokens: 20, Metadata: chain.Metadata{"tenant": "acme"}},
		{Messages: []chain.Message{{Role: "user", Content: "just a prompt"}}, Temperature: &half},
		{ID: "a-3", Messages: []chain.Message{{Role: "user", Content: "with crlf"}}, ResponseSchema: map[string]any{"type": "object", "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}},
		{Messages: []chain.Message{{Role: "user", Content: "no newline at the end"}}, Deadline: "2030-01-01T00:00:00Z"},
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Fatalf("requests:\n got %+v\nwant %+v", reqs, want)
	}
}

// TestReadRequestsReportsABadLine checks that one bad line, whatever is
// wrong with it, fails the whole file with that line's number and a message
// that speaks of the line's fields, not of Go types.
func TestReadRequestsReportsABadLine(t *testing.T) {
	good := `{"prompt":"fine"}`
	tests := map[string]struct {
		line string
		want string // the line's message, after "line N"
	}{
		"not json":               {`{"prompt": "oops"`, `, column 18: not valid JSON: the line ends before the JSON value does`},
		"single quotes":          {`{'prompt':'x'}`, `, column 2: not valid JSON: unexpected "'" (JSON strings take double quotes)`},
		"missing colon":          {`{"prompt" "x"}`, `, column 11: not valid JSON: unexpected '"' (a : missing?)`},
		"trailing comma":         {`{"prompt":"x",}`, `, column 15: not valid JSON: unexpected '}', where a "key" was expected`},
		"not an object":          {`["hello"]`, `: not a JSON object: each line is one request, such as {"prompt": "hello"}`},
		"unknown field":          {`{"prompt":"x","max_token":5}`, `: unknown field "max_token" (did you mean "max_tokens"?)`},
		"no messages, no prompt": {`{"id":"x"}`, `: bad request: messages is required and must not be empty`},
		"empty messages":         {`{"messages":[]}`, `: bad request: messages is required and must not be empty`},
		"both":                   {`{"prompt":"x","messages":[{"role":"user","content":"y"}]}`, `: give "messages" or "prompt", not both`},
		"no role":                {`{"messages":[{"content":"y"}]}`, `: bad request: messages[0].role is required`},
		"id with a dot":          {`{"id":"a.b","prompt":"x"}`, `: bad request: id "a.b" must be one subject token (no '.', '*', '>', spaces or invisible characters)`},
		"negative max_tokens":    {`{"prompt":"x","max_tokens":-1}`, `: bad request: max_tokens must be between 0 and 1000000`},
		"negative temperature":   {`{"prompt":"x","temperature":-0.1}`, `: bad request: temperature must be a finite number, not negative`},
		"deadline not RFC 3339":  {`{"prompt":"x","deadline":"tomorrow"}`, `: bad request: deadline "tomorrow" is not an RFC 3339 time`},
		"metadata object value":  {`{"prompt":"x","metadata":{"tenant":{"a":1}}}`, `: "metadata.tenant" must be a string, a number, true, false or null`},
		"bad reply subject":      {`{"prompt":"x","reply_to":"a..b"}`, `: bad reply subject: "a..b" is not a valid publish subject: it has an empty token`},
		"two values":             {`{"prompt":"x"} {"prompt":"y"}`, `, column 16: more than one JSON value on the line`},
		"id used twice":          {`{"id":"dup","prompt":"x"}` + "\n" + `{"id":"dup","prompt":"y"}`, `: id "dup" is already used on line 3`},
		"empty id":               {`{"id":"","prompt":"x"}`, `: "id" is empty: give one, or leave "id" out and one is assigned`},
		"reply outside prefixes": {`{"prompt":"x","reply_to":"elsewhere.r1"}`, `: bad reply subject: "elsewhere.r1" must start with one of detour.results., _INBOX.`},
		"reply on the API":       {`{"prompt":"x","reply_to":"$JS.API.STREAM.PURGE.DETOUR_REQUESTS"}`, `: bad reply subject: "$JS.API.STREAM.PURGE.DETOUR_REQUESTS" must start with one of detour.results., _INBOX.`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			file := good + "\n\n" + tt.line + "\n" + good + "\n"
			badLine := 3 + strings.Count(tt.line, "\n")
			reqs, err := requestfile.Read(strings.NewReader(file), "reqs.jsonl", []string{"detour.results.", "_INBOX."})
			if err == nil {
				t.Fatalf("accepted: %+v", reqs)
			}
			if reqs != nil {
				t.Errorf("returned %d requests with the error; want none", len(reqs))
			}
			var fileErr *requestfile.FileError
			var lineErr *requestfile.LineError
			if !errors.As(err, &fileErr) || !errors.As(err, &lineErr) {
				t.Fatalf("error %T %v; want a *FileError holding a *LineError", err, err)
			}
			if len(fileErr.Lines) != 1 || lineErr.Line != badLine {
				t.Errorf("bad lines %v; want only line %d", fileErr.Lines, badLine)
			}
			if want := fmt.Sprintf("reqs.jsonl: 1 bad line, nothing sent\n  line %d%s", badLine, tt.want); err.Error() != want {
				t.Errorf("error:\n%s\nwant:\n%s", err, want)
			}
		})
	}
}

// TestReadRequestsRefusesTextReadOtherThanWritten: a line with bytes that
// are not UTF-8, or a lone surrogate escape, would be sent with U+FFFD in
// their place, as a processor refuses them; the line is refused instead.
func TestReadRequestsRefusesTextReadOtherThanWritten(t *testing.T) {
	for line, want := range map[string]string{
		"{\"id\":\"a\xffb\",\"prompt\":\"x\"}": "line 1: the line is not valid UTF-8 at byte 8",
		`{"prompt":"x\ud800"}`:                 "line 1: the line has a lone UTF-16 surrogate escape at byte 12",
	} {
		_, err := requestfile.Read(strings.NewReader(line), "reqs.jsonl", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

// TestReadRequestsChecksTheSchema: a response_schema is compiled as a
// processor would compile it.
func TestReadRequestsChecksTheSchema(t *testing.T) {
	_, err := requestfile.Read(strings.NewReader(`{"prompt":"x","response_schema":{"type":12}}`), "reqs.jsonl", nil)
	if err == nil || !strings.Contains(err.Error(), "line 1: bad request: response_schema is not a valid JSON Schema: at /type") {
		t.Fatalf("error %v; want line 1 and response_schema", err)
	}
}

func TestReadRequestsReportsTenBadLinesAndCountsTheRest(t *testing.T) {
	file := strings.Repeat("hello\n", 25)
	_, err := requestfile.Read(strings.NewReader(file), "words.txt", nil)
	var fileErr *requestfile.FileError
	if !errors.As(err, &fileErr) {
		t.Fatalf("error %v; want a *FileError", err)
	}
	if len(fileErr.Lines) != 10 || fileErr.More != 15 || fileErr.Lines[9].Line != 10 {
		t.Fatalf("reported %d lines (last %d) and %d more; want 10 (last 10) and 15", len(fileErr.Lines), fileErr.Lines[9].Line, fileErr.More)
	}
	if !strings.Contains(err.Error(), "25 bad lines") || !strings.HasSuffix(err.Error(), "and 15 more") {
		t.Fatalf("error %q", err)
	}
}

func TestReadRequestsRefusesAnEmptyFile(t *testing.T) {
	if _, err := requestfile.Read(strings.NewReader("\n  \n"), "empty.jsonl", nil); err == nil || !strings.Contains(err.Error(), "no requests") {
		t.Fatalf("error %v; want no requests", err)
	}
}

// TestReadRequestsTakesTheCacheFields: a line may carry the cache controls
// and scope, which are checked like the processor checks them.
func TestReadRequestsTakesTheCacheFields(t *testing.T) {
	reqs, err := requestfile.Read(strings.NewReader(`{"prompt":"hi","cache_scope":"t-1","cache":{"no_store":true,"stale_if_error":0}}`), "cache.jsonl", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := reqs[0].Cache; reqs[0].CacheScope != "t-1" || c == nil || !c.NoStore || c.StaleIfError == nil || *c.StaleIfError != 0 {
		t.Fatalf("request %+v, want the cache fields", reqs[0])
	}
	for _, line := range []string{`{"prompt":"hi","cache":{"no_stor":true}}`, `{"prompt":"hi","cache_scope":"a.b"}`} {
		if _, err := requestfile.Read(strings.NewReader(line), "bad.jsonl", nil); err == nil {
			t.Errorf("%s: accepted", line)
		}
	}
}

// TestReadRequestsTakesNestedSchemas: only metadata values must be
// scalars; a response_schema holds lists and objects.
func TestReadRequestsTakesNestedSchemas(t *testing.T) {
	line := `{"prompt":"x","response_schema":{"type":"object","required":["answer"],"properties":{"answer":{"type":"string"}}}}`
	reqs, err := requestfile.Read(strings.NewReader(line), "reqs.jsonl", nil)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Read: %d requests, %v; want one", len(reqs), err)
	}
}
