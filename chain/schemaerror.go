package chain

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/detourhq/detour/internal/text"
)

// schemaPrinter words the compiler's findings in its own English.
var schemaPrinter = message.NewPrinter(language.English)

// compileError words a response_schema the compiler refused: where in the
// schema and what is wrong, never the compiler's URL for it, its metaschema
// or its Go types. Other errors keep the compiler's text (schemaError).
func compileError(err error) error {
	var invalid *jsonschema.SchemaValidationError
	var load *jsonschema.LoadURLError
	var missing *jsonschema.JSONPointerNotFoundError
	var noAnchor *jsonschema.AnchorNotFoundError
	var badPointer *jsonschema.InvalidJsonPointerError
	var twice *jsonschema.DuplicateAnchorError
	switch {
	case errors.As(err, &invalid):
		return validationError("response_schema is not a valid JSON Schema", invalid.Err)
	case errors.As(err, &load):
		return outsideRefError(load.URL)
	case errors.As(err, &missing):
		return fmt.Errorf("response_schema refers to %q, which it does not hold", inSchema(missing.URL))
	case errors.As(err, &noAnchor):
		return fmt.Errorf("response_schema refers to %q, which it does not hold", inSchema(noAnchor.Reference))
	case errors.As(err, &badPointer):
		return fmt.Errorf("response_schema refers to %q, which is not a JSON pointer (RFC 6901)", inSchema(badPointer.URL))
	case errors.As(err, &twice):
		at := []string{twice.Ptr1, twice.Ptr2}
		slices.Sort(at)
		return fmt.Errorf("response_schema names the anchor %q twice, at %s and %s", text.Cut(twice.Anchor, maxSchemaErrorText), at[0], at[1])
	}
	return schemaError("response_schema", err)
}

// keywordAt is a keyword's place as a JSON pointer, "/" for the root.
func keywordAt(loc string) string { return cmp.Or(text.Cut(loc, maxSchemaErrorText), "/") }

// inSchema is a reference into the schema without the compiler's name for it.
func inSchema(url string) string {
	return text.Cut(strings.TrimPrefix(url, schemaURL), maxSchemaErrorText)
}

// validationError words a value that does not satisfy its schema: the
// first specific finding and its place as a JSON pointer, after prefix.
func validationError(prefix string, err error) error {
	found, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return schemaError(prefix, err)
	}
	leaf := found // the first, most specific finding without causes of its own
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	return schemaError(prefix, fmt.Errorf("at %s: %s", pointer(leaf.InstanceLocation), leaf.ErrorKind.LocalizedString(schemaPrinter)))
}

// refCycle reports a reference that leads back to where it is, as in
// {"allOf": [{"$ref": "#"}]}, which the compiler accepts and every paid
// answer would fail. Checking null finds a loop met before the answer's
// shape decides the way.
func refCycle(compiled *jsonschema.Schema) error {
	found, ok := errors.AsType[*jsonschema.ValidationError](compiled.Validate(nil))
	if !ok {
		return nil
	}
	for stack := []*jsonschema.ValidationError{found}; len(stack) > 0; {
		e := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], e.Causes...)
		if loop, ok := e.ErrorKind.(*kind.RefCycle); ok {
			return fmt.Errorf("response_schema refers to itself in a loop: %s and %s lead to the same place",
				keywordAt(loop.KeywordLocation1), keywordAt(loop.KeywordLocation2))
		}
	}
	return nil
}

// pointerEscapes escapes a token of a JSON pointer (RFC 6901, section 3).
var pointerEscapes = strings.NewReplacer("~", "~0", "/", "~1")

// pointer is a location as a JSON pointer (RFC 6901), "/" for the root.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscapes.Replace(t))
	}
	return cmp.Or(b.String(), "/")
}

// outsideRefError refuses a schema that refers to ref outside itself.
func outsideRefError(ref string) error {
	return fmt.Errorf("response_schema refers to %q outside itself; only references within it (#/…) are followed",
		text.Cut(ref, maxSchemaErrorText))
}
