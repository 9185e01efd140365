package publisher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// Copies returns n requests that each ask prompt as one user message.
func Copies(prompt string, n int) []wire.Request {
	reqs := make([]wire.Request, n)
	for i := range reqs {
		reqs[i] = wire.Request{Messages: []chain.Message{{Role: "user", Content: prompt}}}
	}
	return reqs
}

// maxSchemaFile bounds the schema file read, in bytes: well above
// chain.MaxSchemaBytes, which CompileSchema holds it to.
const maxSchemaFile = 4 * chain.MaxSchemaBytes

// ReadSchema reads a JSON Schema document, which must be one JSON object,
// and checks that it compiles as a processor would compile it.
func ReadSchema(r io.Reader) (map[string]any, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSchemaFile+1))
	switch {
	case err != nil:
		return nil, err
	case len(data) > maxSchemaFile:
		return nil, fmt.Errorf("larger than %d bytes, more than a response_schema may be", maxSchemaFile)
	}
	// Text read other than written would change an enum, a const or a
	// pattern, as a processor refuses such a body.
	if err := wire.CheckJSONText(data, "the schema"); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var schema map[string]any
	if err := dec.Decode(&schema); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if schema == nil {
		return nil, errors.New("not a JSON object: null")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	if _, err := chain.CompileSchema(schema); err != nil {
		return nil, err
	}
	return schema, nil
}

// WithSchema puts schema into the response_schema of every request that has
// none of its own; a request that names one keeps it.
func WithSchema(reqs []wire.Request, schema map[string]any) {
	for i := range reqs {
		if reqs[i].ResponseSchema == nil {
			reqs[i].ResponseSchema = schema
		}
	}
}
