package requestfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// LineError is a line of a requests file that cannot be sent.
type LineError struct {
	Line   int // 1-based
	Column int // 1-based, in characters; 0 when the problem is not at one place
	Err    error
}

func (e *LineError) Error() string {
	if e.Column > 0 {
		return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap returns the reason the line was refused.
func (e *LineError) Unwrap() error { return e.Err }

// FileError lists the bad lines of a requests file: the first
// maxReportedLines of them, and how many more there were.
type FileError struct {
	Name  string
	Lines []*LineError
	More  int
	// Fields is set when a line had an unknown field that is not a
	// misspelling of a known one: the fields a line may have are listed
	// once, after the lines.
	Fields []string
}

// maxReportedLines bounds a FileError, so a file in the wrong format does not
// print one error per line.
const maxReportedLines = 10

func (e *FileError) Error() string {
	var b strings.Builder
	n := len(e.Lines) + e.More
	fmt.Fprintf(&b, "%s: %d bad line", e.Name, n)
	if n != 1 {
		b.WriteString("s")
	}
	b.WriteString(", nothing sent")
	for _, l := range e.Lines {
		fmt.Fprintf(&b, "\n  %v", l)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", e.More)
	}
	if len(e.Fields) > 0 {
		fmt.Fprintf(&b, "\n  (the fields of a line: %s)", strings.Join(e.Fields, ", "))
	}
	return b.String()
}

// Unwrap returns the reported LineErrors, for errors.As.
func (e *FileError) Unwrap() []error {
	errs := make([]error, len(e.Lines))
	for i, l := range e.Lines {
		errs[i] = l
	}
	return errs
}

// fileLine is one line of a requests file: a request in the shape of
// docs/requests.md or, as a convenience, a prompt in place of messages.
type fileLine struct {
	wire.Request
	Prompt string `json:"prompt"`
}

// Read reads a JSON Lines file of requests, one JSON object a line in
// the shape of docs/requests.md (blank lines are skipped). A line may give
// "prompt": "text" instead of "messages", meaning one user message. Every line
// is checked as a processor would check it, and also for unknown fields,
// trailing data and ids used twice; when any line is bad the error is a
// *FileError naming each such line, and no request is returned, so a run
// sends all of the file or none of it. name labels the errors.
// replyPrefixes are the processors' DETOUR_REPLY_PREFIXES, which a line's
// reply_to must start with (a processor dead-letters any other); nil
// admits any valid subject.
func Read(r io.Reader, name string, replyPrefixes []string) ([]wire.Request, error) {
	lines, err := readLines(r, name, replyPrefixes)
	if err != nil {
		return nil, err
	}
	return lo.Map(lines, func(l checkedLine, _ int) wire.Request { return l.req }), nil
}

// ReadSamples reads a requests file as Read does and returns what
// the chain is asked for each line, response_schema compiled. Each sample's
// ID is the line's id or, when it gives none, "line N": the name the check
// command shows it under. Samples are not sent, so any valid reply_to
// passes.
func ReadSamples(r io.Reader, name string) ([]chain.Request, error) {
	lines, err := readLines(r, name, nil)
	if err != nil {
		return nil, err
	}
	return lo.Map(lines, func(l checkedLine, _ int) chain.Request {
		s := l.chain
		s.ID = l.req.ID
		if s.ID == "" {
			s.ID = fmt.Sprintf("line %d", l.line)
		}
		return s
	}), nil
}

// checkedLine is a line that passed every check: the request to send, and
// what a processor asks its chain for it.
type checkedLine struct {
	line  int
	req   wire.Request
	chain chain.Request
}

func readLines(r io.Reader, name string, replyPrefixes []string) ([]checkedLine, error) {
	var (
		reqs         []checkedLine
		bad          FileError
		idLine       = map[string]int{}
		unknownField bool
	)
	bad.Name = name
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		text, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, fmt.Errorf("%s: %w", name, readErr)
		}
		if n == 1 {
			text = bytes.TrimPrefix(text, []byte("\ufeff"))
		}
		if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
			req, chainReq, err := parseLine(trimmed, replyPrefixes, &unknownField)
			if err == nil && req.ID != "" {
				if first, dup := idLine[req.ID]; dup {
					err = fmt.Errorf("id %q is already used on line %d", req.ID, first)
				}
				idLine[req.ID] = n
			}
			switch {
			case err == nil:
				reqs = append(reqs, checkedLine{line: n, req: req, chain: chainReq})
			case len(bad.Lines) < maxReportedLines:
				le := &LineError{Line: n, Err: err}
				if pe, ok := err.(*placedError); ok {
					lead := len(text) - len(bytes.TrimLeftFunc(text, unicode.IsSpace))
					le.Column, le.Err = utf8.RuneCount(text[:lead+pe.offset])+1, pe.err
				}
				bad.Lines = append(bad.Lines, le)
			default:
				bad.More++
			}
		}
		if readErr != nil {
			break
		}
	}
	if len(bad.Lines) > 0 {
		if unknownField {
			bad.Fields = fieldNames(jsonFields(reflect.TypeFor[fileLine]()))
		}
		return nil, &bad
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests", name)
	}
	return reqs, nil
}

// placedError is a problem at one place of a line: offset is its byte, from 0.
type placedError struct {
	offset int
	err    error
}

func (e *placedError) Error() string { return e.err.Error() }

// parseLine checks one line of a requests file. Its errors speak of the
// line's fields, not of Go types: `"messages" must be a list of
// {"role","content"} objects`. unknownField is set when a field is not
// known and not a near miss of one.
func parseLine(data []byte, replyPrefixes []string, unknownField *bool) (wire.Request, chain.Request, error) {
	if err := wire.CheckJSONText(data, "the line"); err != nil {
		return wire.Request{}, chain.Request{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return wire.Request{}, chain.Request{}, syntaxError(err, data)
	}
	if end := int(dec.InputOffset()); len(bytes.TrimSpace(data[end:])) > 0 {
		rest := end + len(data[end:]) - len(bytes.TrimLeftFunc(data[end:], unicode.IsSpace))
		return wire.Request{}, chain.Request{}, &placedError{rest, errors.New("more than one JSON value on the line")}
	}
	if problems := shapeProblems(raw, reflect.TypeFor[fileLine](), "", unknownField); len(problems) > 0 {
		return wire.Request{}, chain.Request{}, errors.New(strings.Join(problems, "; "))
	}
	var l fileLine
	if err := json.Unmarshal(raw, &l); err != nil {
		// The shape was checked above; this is a safety net only.
		return wire.Request{}, chain.Request{}, fmt.Errorf("not a request: %w", err)
	}
	req := l.Request
	switch {
	case len(req.Messages) > 0 && l.Prompt != "":
		return req, chain.Request{}, errors.New(`give "messages" or "prompt", not both`)
	case len(req.Messages) == 0 && l.Prompt != "":
		req.Messages = []chain.Message{{Role: "user", Content: l.Prompt}}
	}
	if l.ID == "" && givesID(raw) {
		// Sent as it stands, a processor refuses it; left out, the client
		// assigns one.
		return req, chain.Request{}, errors.New(`"id" is empty: give one, or leave "id" out and one is assigned`)
	}
	chainReq, err := check(req, replyPrefixes)
	return req, chainReq, err
}

// givesID reports whether the line, a JSON object, has an "id" key.
func givesID(raw json.RawMessage) bool {
	var probe struct {
		ID *string `json:"id"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.ID != nil
}

// check applies to req the checks a processor makes on decoding
// (docs/requests.md), so that a request it would dead-letter is refused
// before sending, and returns what the chain is asked for req. A reply_to
// must start with one of replyPrefixes (any valid subject when nil); an id
// left out passes, since the client assigns one.
func check(req wire.Request, replyPrefixes []string) (chain.Request, error) {
	if req.ID == "" {
		req.ID = "placeholder"
	}
	if replyPrefixes == nil {
		replyPrefixes = []string{""} // the empty prefix admits every valid publish subject
	}
	body, err := json.Marshal(req)
	if err != nil {
		return chain.Request{}, err
	}
	header := nats.Header{wire.HeaderContentType: {wire.JSON.ContentType()}}
	d, err := wire.DecodeRequest(body, header, 0, replyPrefixes)
	if err != nil {
		return chain.Request{}, err
	}
	return d.ChainRequest(context.Background(), nil)
}
