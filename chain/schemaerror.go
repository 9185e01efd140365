package chain

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/detourhq/detour/internal/text"
)

// schemaPrinter words the compiler's findings; it is the compiler's own
// English.
var schemaPrinter = message.NewPrinter(language.English)

// compileError words a response_schema the compiler refused for the
// requester: where in the schema and what is wrong, never the compiler's
// internal URL for it, its metaschema or its Go types. A schema that breaks
// the metaschema is named by its first finding (JSON pointer into the
// schema); a reference outside the schema, or to a place it does not hold,
// by the reference. Other errors keep the compiler's text (schemaError).
func compileError(err error) error {
	var invalid *jsonschema.SchemaValidationError
	var load *jsonschema.LoadURLError
	var missing *jsonschema.JSONPointerNotFoundError
	switch {
	case errors.As(err, &invalid):
		var found *jsonschema.ValidationError
		if errors.As(invalid.Err, &found) {
			leaf := firstLeaf(found)
			return schemaError("response_schema is not a valid JSON Schema",
				fmt.Errorf("at %s: %s", pointer(leaf.InstanceLocation), leaf.ErrorKind.LocalizedString(schemaPrinter)))
		}
	case errors.As(err, &load):
		return fmt.Errorf("response_schema refers to %q outside itself; only references within it (#/…) are followed",
			text.Cut(load.URL, maxSchemaErrorText))
	case errors.As(err, &missing):
		return fmt.Errorf("response_schema refers to %q, which it does not hold",
			text.Cut(strings.TrimPrefix(missing.URL, schemaURL), maxSchemaErrorText))
	}
	return schemaError("response_schema", err)
}

// firstLeaf is the first finding without causes of its own: the most
// specific one ("value must be one of …" rather than "'anyOf' failed").
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

// pointer is a location as a JSON pointer (RFC 6901), "/" for the root.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
