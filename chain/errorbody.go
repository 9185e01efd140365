package chain

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// upstreamError is what a provider's error body says, whichever shape it
// takes: OpenAI's {"error":{"message","type","param","code"}}, Anthropic's
// {"type":"error","error":{"type","message"}}, a gateway's {"error":"text"}
// or {"error":{"message","code":429}}, Google's {"error":{"code","message",
// "status","details"}}, vLLM's top-level {"object":"error",...}, an array of
// these, and what gateways add (errormeta.go). Of an HTML page, its title.
type upstreamError struct {
	found   bool // the body holds an error object or an error string
	message string
	// names are the words the body classes itself by, as sent: its type,
	// code and status fields, Google's ErrorInfo and errors[] reasons,
	// Azure's innererror code, OpenRouter's metadata.error_type, and those
	// of a relayed error; at most maxNames.
	names      []string
	code       int           // a numeric code or status field (429, "503")
	retryDelay time.Duration // Google's RetryInfo retryDelay
	loadWait   time.Duration // Hugging Face's estimated_time
	flagged    bool          // OpenRouter's metadata.reasons lists categories
	// detail is the message of a relayed upstream error (OpenRouter's
	// metadata.raw), or its text when it is no JSON.
	detail string
	// hintHeader holds the rate-limit headers relayed in the body
	// (OpenRouter's metadata.headers), at most maxBodyHeaders.
	hintHeader http.Header
	html       bool   // an HTML (or other markup) page
	title      string // its <title>
	raw        string // the trimmed body, when neither object nor markup
}

// maxTitleSearch bounds how far into an HTML page the <title> is looked for.
const maxTitleSearch = 64 << 10

// maxReadText bounds each text of an error body read for words and waits:
// an 8 MiB message of "try again in 1" took seconds of CPU to read whole.
const maxReadText = 16 << 10

// decodeErrorBody reads an error body of any shape upstreamError lists,
// keeping what it cannot read as raw text, its texts cut to maxReadText.
func decodeErrorBody(body []byte) upstreamError {
	b := bytes.TrimSpace(body)
	u := upstreamError{raw: string(b)}
	if len(b) > 0 && b[0] == '<' {
		// A proxy's or CDN's page: markup that no reader of a result wants.
		u = upstreamError{html: true, title: htmlTitle(b)}
	} else if doc := decodeDocument(b, maxRelayDepth); doc.found {
		u = doc
	}
	u.message, u.detail, u.raw = text.Cut(u.message, maxReadText), text.Cut(u.detail, maxReadText), text.Cut(u.raw, maxReadText)
	return u
}

// decodeDocument reads a JSON error object, or the first of an array of
// them, reading relayed errors (metadata.raw) at most depth levels down.
func decodeDocument(b []byte, depth int) upstreamError {
	if len(b) == 0 || b[0] != '[' {
		return decodeObject(b, depth)
	}
	var list []json.RawMessage
	if json.Unmarshal(b, &list) == nil {
		for _, item := range list {
			if u := decodeObject(item, depth); u.found {
				return u
			}
		}
	}
	return upstreamError{}
}

// decodeObject reads one JSON document that may carry an error.
func decodeObject(b []byte, depth int) upstreamError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return upstreamError{}
	}
	inner, ok := doc["error"]
	if !ok && jsonString(doc["object"]) == "error" {
		inner, ok = b, true // vLLM puts the error's fields at the top level
	}
	if !ok {
		return upstreamError{}
	}
	if s := jsonString(inner); s != "" {
		return upstreamError{found: true, message: s, loadWait: secondsHint(doc["estimated_time"])}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(inner, &fields) != nil || len(fields) == 0 {
		return upstreamError{} // "error": null or {} beside an answer says nothing went wrong
	}
	u := upstreamError{found: true, message: jsonString(fields["message"]), loadWait: secondsHint(doc["estimated_time"])}
	for _, key := range []string{"type", "code", "status"} {
		if name, code := nameOrCode(fields[key]); name != "" {
			u.addName(name)
		} else if code != 0 && u.code == 0 {
			u.code = code
		}
	}
	u.readDetails(fields["details"])
	u.readReasons(fields)
	u.readMetadata(fields["metadata"], depth)
	return u
}

// nameOrCode reads a type, code or status field: a word is a name, a
// number (or digits) from 100 to 999 an HTTP-like code.
func nameOrCode(raw json.RawMessage) (name string, code int) {
	s := jsonString(raw)
	if s == "" {
		s = string(bytes.TrimSpace(raw)) // a JSON number, or null, or worse
	} else if _, err := strconv.Atoi(s); err != nil {
		return s, 0
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 100 && f < 1000 && f == float64(int(f)) {
		return "", int(f)
	}
	return "", 0
}

// jsonString is raw's value when it is a JSON string, else "".
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// titleTag finds a page's <title>, ignoring case.
var titleTag = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title`)

// htmlTitle is the page's <title>, unescaped with whitespace collapsed.
func htmlTitle(page []byte) string {
	m := titleTag.FindSubmatch(page[:min(len(page), maxTitleSearch)])
	if m == nil {
		return ""
	}
	return oneLine(html.UnescapeString(string(m[1])))
}

// text is the readable part of the body, before the caller redacts it.
func (u upstreamError) text() string {
	switch {
	case u.html && u.title != "":
		return u.title
	case u.html:
		return "HTML error page"
	case u.message != "" && u.detail != "":
		return u.message + ": " + u.detail
	case u.message != "":
		return u.message
	case u.detail != "":
		return u.detail
	case u.found && len(u.names) > 0:
		return strings.Join(u.names, ", ")
	case u.found && u.code != 0:
		return "code " + strconv.Itoa(u.code)
	case u.raw != "":
		return u.raw
	}
	return "no error body"
}

// label names an error object inside a 2xx answer by its code or first name.
func (u upstreamError) label() string {
	switch {
	case u.code != 0:
		return "code " + strconv.Itoa(u.code)
	case len(u.names) > 0:
		return u.names[0]
	}
	return "no code"
}
