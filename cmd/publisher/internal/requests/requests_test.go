package requests_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/detourhq/detour/cmd/publisher/internal/requests"
	"github.com/detourhq/detour/wire"
)

func TestReadSchema(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want string // error substring; empty for success
	}{
		"object":           {`{"type":"object","required":["answer"]}`, ""},
		"not json":         {`{"type":`, "not a JSON object"},
		"not an object":    {`["type"]`, "not a JSON object"},
		"null":             {`null`, "not a JSON object"},
		"two documents":    {`{} {}`, "more than one JSON value"},
		"does not compile": {`{"type":"thing"}`, "response_schema"},
		"remote reference": {`{"$ref":"https://example.com/schema.json"}`, "response_schema"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			schema, err := requests.ReadSchema(strings.NewReader(tt.doc))
			switch {
			case tt.want == "" && (err != nil || schema == nil):
				t.Fatalf("error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v; want %q", err, tt.want)
			}
		})
	}
}

func TestWithSchemaKeepsARequestsOwnSchema(t *testing.T) {
	own := map[string]any{"type": "string"}
	shared := map[string]any{"type": "object"}
	reqs := append(requests.Copies("x", 2), wire.Request{ResponseSchema: own})
	requests.WithSchema(reqs, shared)
	for i, want := range []map[string]any{shared, shared, own} {
		if !reflect.DeepEqual(reqs[i].ResponseSchema, want) {
			t.Errorf("request %d schema %v, want %v", i, reqs[i].ResponseSchema, want)
		}
	}
}

// TestReadSchemaRefusesTextReadOtherThanWritten: as for a requests line.
func TestReadSchemaRefusesTextReadOtherThanWritten(t *testing.T) {
	for schema, want := range map[string]string{
		"{\"enum\":[\"a\xffb\"]}": "the schema is not valid UTF-8 at byte 11",
		`{"const":"x\udfff"}`:     "the schema has a lone UTF-16 surrogate escape at byte 11",
	} {
		_, err := requests.ReadSchema(strings.NewReader(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", schema, err, want)
		}
	}
}
