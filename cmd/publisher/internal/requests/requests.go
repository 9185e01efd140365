package requests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/internal/requestfile"
	"github.com/detourhq/detour/wire"
)

// Source is where the requests of a run come from: N copies of Prompt, or
// the lines of File ("-" for standard input); then Schema, when set, names a
// JSON Schema file put into each request that has no response_schema.
type Source struct {
	Prompt string
	N      int
	File   string
	Schema string
}

// Load builds the requests of src. A file's reply_to must start with one of
// replyPrefixes, the processors' DETOUR_REPLY_PREFIXES; a bad line is a
// *requestfile.FileError and nothing is returned. Errors of the schema name
// -schema, the flag that gave it.
func Load(src Source, stdin io.Reader, replyPrefixes []string) ([]wire.Request, error) {
	var reqs []wire.Request
	if src.File == "" {
		reqs = Copies(src.Prompt, src.N)
	} else {
		r, name := stdin, "stdin"
		if src.File != "-" {
			file, err := os.Open(src.File)
			if err != nil {
				return nil, err
			}
			defer file.Close()
			r, name = file, src.File
		}
		var err error
		if reqs, err = requestfile.Read(r, name, replyPrefixes); err != nil {
			return nil, err
		}
	}
	if src.Schema != "" {
		file, err := os.Open(src.Schema)
		if err != nil {
			return nil, fmt.Errorf("-schema: %w", err)
		}
		defer file.Close()
		schema, err := ReadSchema(file)
		if err != nil {
			return nil, fmt.Errorf("-schema %s: %w", src.Schema, err)
		}
		WithSchema(reqs, schema)
	}
	return reqs, nil
}

// Copies returns n requests that each ask prompt as one user message.
func Copies(prompt string, n int) []wire.Request {
	return lo.Times(n, func(int) wire.Request {
		return wire.Request{Messages: []chain.Message{{Role: "user", Content: prompt}}}
	})
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
