package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled response_schema: a JSON Schema the answer's content
// must satisfy before the answer may win.
type Schema struct {
	compiled *jsonschema.Schema
}

// schemaURL is the name the request's schema is compiled under; it is never
// fetched.
const schemaURL = "detour:response_schema"

// CompileSchema compiles a request's response_schema. References outside the
// schema itself are refused: a request must not make the processor read files
// or fetch URLs.
func CompileSchema(doc map[string]any) (*Schema, error) {
	// Round-trip through JSON so values decoded from msgpack (int64, []byte
	// keys...) reach the compiler as JSON values.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("response_schema is not JSON: %w", err)
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("response_schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no scheme may be loaded
	if err := c.AddResource(schemaURL, parsed); err != nil {
		return nil, fmt.Errorf("response_schema: %w", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("response_schema: %w", err)
	}
	return &Schema{compiled: compiled}, nil
}

// Validate checks that content is JSON satisfying the schema. A Markdown code
// fence around the JSON, which models often add, is tolerated.
func (s *Schema) Validate(content string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(stripFence(content)))
	if err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	if err := s.compiled.Validate(inst); err != nil {
		return fmt.Errorf("answer does not satisfy response_schema: %s", oneLine(err.Error()))
	}
	return nil
}

// stripFence removes a surrounding ```json … ``` fence.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "```"), "```")
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{[\"") {
		t = t[nl+1:] // drop the language tag line
	}
	return t
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
