package providertest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/samber/lo"
)

// Request is a completion request as the server decoded it, whichever the
// flavour, so that tests can check what an adapter sent.
type Request struct {
	Model    string
	Messages []Message
	// MaxTokens is max_tokens (or OpenAI's max_completion_tokens); 0 if absent.
	MaxTokens int
	// Temperature is nil when the request did not send one.
	Temperature *float64
	// System is Anthropic's top-level system prompt. OpenAI system prompts
	// stay in Messages with role "system", where that API puts them.
	System string
	// Header is a copy of the HTTP request headers (x-api-key,
	// anthropic-version, Authorization, ...).
	Header http.Header
	// Query is the request URL's query: Azure OpenAI's api-version, for
	// one, which a base_url carries.
	Query url.Values
	// Body is the request body exactly as it arrived (JSON), for checks the
	// decoded fields above cannot make: which key carried max_tokens, whether
	// system was a string or blocks, which fields were sent at all.
	Body []byte
	// Flavor is the flavour of the server that received the request, so a
	// script can answer as that service would (OutOfCredit).
	Flavor Flavor
	// At is when the request arrived, before its body was read: the gaps
	// between arrivals show how long a client waited before retrying.
	At time.Time
}

// Message is one turn of the conversation. Content given as an array of text
// blocks is joined into one string.
type Message struct {
	Role    string
	Content string
}

// wireRequest is the union of both flavours' request bodies.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	System              json.RawMessage `json:"system"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// decodeRequest reads a request body of either flavour.
func decodeRequest(body []byte, header http.Header) (Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Request{}, fmt.Errorf("body is not valid JSON: %w", err)
	}
	system, err := text(w.System)
	if err != nil {
		return Request{}, fmt.Errorf("system: %w", err)
	}
	req := Request{
		Model: w.Model, MaxTokens: cmp.Or(w.MaxTokens, w.MaxCompletionTokens), Temperature: w.Temperature,
		System: system, Header: header.Clone(), Body: bytes.Clone(body),
	}
	for i, m := range w.Messages {
		content, err := text(m.Content)
		if err != nil {
			return Request{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: content})
	}
	return req, nil
}

// validate refuses what the real service would refuse with 400, so that an
// adapter bug shows up as a request-class failure in tests instead of passing.
func validate(f Flavor, req Request) error {
	switch {
	case req.Model == "":
		return errors.New("model: field required")
	case len(req.Messages) == 0:
		return errors.New("messages: at least one message is required")
	case f == Anthropic && req.MaxTokens <= 0:
		return errors.New("max_tokens: field required")
	}
	if i := slices.IndexFunc(req.Messages, func(m Message) bool { return m.Role == "" }); i >= 0 {
		return fmt.Errorf("messages[%d].role: field required", i)
	}
	return nil
}

// text accepts content as both APIs allow it: a string, or an array of blocks
// whose "text" fields are joined.
func text(raw json.RawMessage) (string, error) {
	var s string // also "" for an absent field and for null
	if len(raw) == 0 || json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", errors.New("must be a string or an array of text blocks")
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// clone copies what a script or a caller of Received could otherwise mutate
// under the server's feet.
func (r Request) clone() Request {
	r.Messages, r.Header, r.Query, r.Body = slices.Clone(r.Messages), r.Header.Clone(), maps.Clone(r.Query), bytes.Clone(r.Body)
	if r.Temperature != nil {
		r.Temperature = new(*r.Temperature)
	}
	return r
}

// tokens is a rough, deterministic token count (words) for usage fields.
func tokens(s ...string) int {
	return lo.SumBy(s, func(x string) int { return len(strings.Fields(x)) })
}
