package requestfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/suggest"
)

// metadataType is the one map whose values must be scalars; other maps of
// any (response_schema) take any JSON value.
var metadataType = reflect.TypeFor[chain.Metadata]()

// syntaxError rewords encoding/json's complaint about a line, and places it.
func syntaxError(err error, line []byte) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return &placedError{len(line), errors.New("not valid JSON: the line ends before the JSON value does")}
	case errors.As(err, &se):
		msg := se.Error()
		if c, ok := strings.CutPrefix(msg, "invalid character "); ok {
			char, rest, _ := strings.Cut(c, " ")
			if char == `'\''` {
				char = `"'"`
			}
			msg = "unexpected " + char
			switch {
			case char == `"'"`:
				msg += " (JSON strings take double quotes)"
			case strings.HasPrefix(rest, "looking for beginning of object key"):
				msg += ", where a \"key\" was expected"
			case rest == "after object key":
				msg += " (a : missing?)"
			case rest == "after object key:value pair" || rest == "after array element":
				msg += " (a , missing?)"
			}
		}
		// The offset counts the bytes read, the bad one included.
		return &placedError{min(max(int(se.Offset)-1, 0), len(line)), errors.New("not valid JSON: " + msg)}
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

// shapeProblems checks the JSON value raw against what t decodes, as
// encoding/json would, and says what is wrong in the terms of the file:
// `"messages" must be a list of {"role","content"} objects`,
// `unknown field "mesages" (did you mean "messages"?)`. path names raw
// ("" for the line itself); hint is set when an unknown field of the line
// had no near match, so that the caller can list the fields once.
func shapeProblems(raw json.RawMessage, t reflect.Type, path string, hint *bool) []string {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil // leaves the zero value, as encoding/json does
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func() []string {
		if path == "" {
			return []string{"not a JSON object: each line is one request, such as {\"prompt\": \"hello\"}"}
		}
		return []string{fmt.Sprintf("%q must be %s", path, describe(t))}
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Struct:
		if raw[0] != '{' {
			return wrong()
		}
		fields := jsonFields(t)
		names := fieldNames(fields)
		var out []string
		seen := map[string]bool{}
		for _, kv := range members(raw) {
			f, ok := fieldFor(fields, kv.key)
			if !ok {
				msg := fmt.Sprintf("unknown field %q", kv.key)
				switch s, near := suggest.Closest(kv.key, names); {
				case near:
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				case path == "":
					*hint = true
				default:
					msg += fmt.Sprintf(" (its fields: %s)", quoteNames(names, ", "))
				}
				out = append(out, at(path, msg))
				continue
			}
			if seen[f.name] {
				out = append(out, at(path, fmt.Sprintf("%q is given twice", f.name)))
				continue
			}
			seen[f.name] = true
			out = append(out, shapeProblems(kv.value, f.typ, join(path, f.name), hint)...)
		}
		return out
	case reflect.Slice:
		if raw[0] != '[' {
			return wrong()
		}
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		var out []string
		for i, item := range items {
			out = append(out, shapeProblems(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), hint)...)
		}
		return out
	case reflect.Map:
		if raw[0] != '{' {
			return wrong()
		}
		var out []string
		for _, kv := range members(raw) {
			if t == metadataType {
				// Metadata values are scalars only.
				if v := bytes.TrimSpace(kv.value); len(v) > 0 && (v[0] == '{' || v[0] == '[') {
					out = append(out, fmt.Sprintf("%q must be a string, a number, true, false or null", join(path, kv.key)))
				}
				continue
			}
			out = append(out, shapeProblems(kv.value, t.Elem(), join(path, kv.key), hint)...)
		}
		return out
	}
	if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
		return wrong()
	}
	return nil
}

// at puts the place of a problem before it: `"messages[0]": unknown field "text"`.
func at(path, msg string) string {
	if path == "" {
		return msg
	}
	return fmt.Sprintf("%q: %s", path, msg)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// member is one key of a JSON object, in the order written.
type member struct {
	key   string
	value json.RawMessage
}

// members lists the keys of a JSON object that is known to be valid.
func members(raw json.RawMessage) []member {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		out = append(out, member{key, v})
	}
	return out
}

// jsonField is a field of a struct as encoding/json sees it.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the fields encoding/json decodes into t, the fields of
// embedded structs included, in declaration order.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type})
	}
	return out
}

// fieldFor finds the field a key decodes into: the exact name, else one
// that differs only in case, as encoding/json matches them.
func fieldFor(fields []jsonField, key string) (jsonField, bool) {
	if i := slices.IndexFunc(fields, func(f jsonField) bool { return f.name == key }); i >= 0 {
		return fields[i], true
	}
	if i := slices.IndexFunc(fields, func(f jsonField) bool { return strings.EqualFold(f.name, key) }); i >= 0 {
		return fields[i], true
	}
	return jsonField{}, false
}

// describe says what a value of t is written as: "a string", "a whole
// number", `a list of {"role","content"} objects`.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			return "a list of " + shape(e) + " objects"
		}
		return "a list"
	case reflect.Map:
		return "a JSON object"
	case reflect.Struct:
		return "a " + shape(t) + " object"
	}
	return "a JSON value"
}

// shape is a struct's fields as the file writes them: {"role","content"}.
func shape(t reflect.Type) string {
	return "{" + quoteNames(fieldNames(jsonFields(t)), ",") + "}"
}

func fieldNames(fields []jsonField) []string {
	return lo.Map(fields, func(f jsonField, _ int) string { return f.name })
}

func quoteNames(names []string, sep string) string {
	return strings.Join(lo.Map(names, func(n string, _ int) string { return strconv.Quote(n) }), sep)
}
