package text

import (
	"reflect"
	"strconv"
	"strings"
)

// JSONKind words the kind of JSON value a Go type is decoded from, as an
// error tells a user what a field must be ("an integer", "a list"): never
// the Go type itself.
func JSONKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return JSONKind(t.Elem())
	}
	return "an object"
}

// JSONFound words the value encoding/json found where it wanted another
// kind, from json.UnmarshalTypeError.Value ("number 1.5", "array",
// "bool"): the number itself, quoted and cut to 64 bytes, or its kind as
// JSONKind words kinds ("a list", "true or false").
func JSONFound(value string) string {
	switch {
	case strings.HasPrefix(value, "number "):
		return strconv.Quote(Cut(strings.TrimPrefix(value, "number "), 64))
	case value == "number":
		return "a number"
	case value == "string":
		return "a string"
	case value == "bool":
		return "true or false"
	case value == "array":
		return "a list"
	case value == "object":
		return "an object"
	}
	return value
}
