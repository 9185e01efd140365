package chain

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// This file reads what providers and gateways put beside the message and
// type of an error: Google's details, Azure's innererror, OpenRouter's
// metadata. The body table (bodyrules.go) and the wait hints (hints.go)
// need it; every list read here is bounded, as the body is outside input.

const (
	// maxNames bounds upstreamError.names: a body listing thousands of
	// details would otherwise make every row of the table read them all.
	maxNames = 16
	// maxBodyHeaders bounds the rate-limit headers read from a body.
	maxBodyHeaders = 32
	// maxRelayDepth is how many relayed errors deep (an OpenRouter
	// metadata.raw holding another gateway's body) the decoder reads.
	maxRelayDepth = 2
)

// addName keeps name, within maxNames.
func (u *upstreamError) addName(name string) {
	if name != "" && len(u.names) < maxNames {
		u.names = append(u.names, name)
	}
}

// readDetails reads Google's details list (https://cloud.google.com/apis/design/errors):
// google.rpc.RetryInfo's retryDelay ("30s", "1.5s") and google.rpc.ErrorInfo's
// reason ("API_KEY_INVALID", "CONSUMER_SUSPENDED"), which says why the call
// was refused far more precisely than the status does.
func (u *upstreamError) readDetails(raw json.RawMessage) {
	var details []map[string]json.RawMessage
	if json.Unmarshal(raw, &details) != nil {
		return
	}
	for _, d := range details {
		switch typ := jsonString(d["@type"]); {
		case strings.HasSuffix(typ, "google.rpc.RetryInfo"):
			if delay, ok := parseProtoDuration(jsonString(d["retryDelay"])); ok && u.retryDelay == 0 {
				u.retryDelay = delay
			}
		case strings.HasSuffix(typ, "google.rpc.ErrorInfo"):
			u.addName(jsonString(d["reason"]))
		}
	}
}

// readReasons reads the other places an error names its reason: Google's
// older errors[].reason ("rateLimitExceeded", "forbidden") and Azure
// OpenAI's innererror.code ("ResponsibleAIPolicyViolation", which its
// content filter sends with code "content_filter").
func (u *upstreamError) readReasons(fields map[string]json.RawMessage) {
	var errs []map[string]json.RawMessage
	if json.Unmarshal(fields["errors"], &errs) == nil {
		for _, e := range errs {
			u.addName(jsonString(e["reason"]))
		}
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(fields["innererror"], &inner) == nil {
		u.addName(jsonString(inner["code"]))
	}
}

// openRouterMetadata is what OpenRouter adds to an error
// (https://openrouter.ai/docs/api-reference/errors): the categories a
// flagged input was flagged for, the upstream provider's own error body as
// text, the rate-limit headers of a 429, and a word for the kind of error.
type openRouterMetadata struct {
	Reasons      []json.RawMessage          `json:"reasons"`
	FlaggedInput json.RawMessage            `json:"flagged_input"`
	Raw          json.RawMessage            `json:"raw"`
	Headers      map[string]json.RawMessage `json:"headers"`
	ErrorType    json.RawMessage            `json:"error_type"`
}

// readMetadata reads an OpenRouter metadata object; a relayed error in raw
// is read depth levels down at most.
func (u *upstreamError) readMetadata(raw json.RawMessage, depth int) {
	var m openRouterMetadata
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return
	}
	u.flagged = len(m.Reasons) > 0 || jsonString(m.FlaggedInput) != ""
	u.addName(jsonString(m.ErrorType))
	for key, value := range m.Headers {
		if len(u.hintHeader) >= maxBodyHeaders {
			break
		}
		if v := jsonString(value); v != "" {
			if u.hintHeader == nil {
				u.hintHeader = http.Header{}
			}
			u.hintHeader.Set(key, v)
		}
	}
	u.readRelayed(m.Raw, depth)
}

// readRelayed reads the upstream error a gateway relays: a JSON document
// (as a string, or as an object) of any shape decodeErrorBody reads, or
// plain text. Its names and hints join the body's; its message becomes the
// detail.
func (u *upstreamError) readRelayed(raw json.RawMessage, depth int) {
	doc := bytes.TrimSpace(raw)
	if s := jsonString(raw); s != "" {
		doc = bytes.TrimSpace([]byte(s))
	}
	if len(doc) == 0 || string(doc) == "null" {
		return
	}
	var relayed upstreamError
	if depth > 0 && (doc[0] == '{' || doc[0] == '[') {
		relayed = decodeRelayed(doc, depth-1)
	}
	if !relayed.found {
		var bare struct{ Message json.RawMessage }
		switch {
		case json.Unmarshal(doc, &bare) == nil && jsonString(bare.Message) != "":
			u.detail = jsonString(bare.Message) // Bedrock's {"message": ...}
		case jsonString(raw) != "":
			u.detail = string(doc) // plain text, or JSON of a shape unknown here
		}
		return
	}
	u.detail = relayed.message
	if relayed.detail != "" {
		u.detail = strings.TrimPrefix(u.detail+": "+relayed.detail, ": ")
	}
	for _, name := range relayed.names {
		u.addName(name)
	}
	u.flagged = u.flagged || relayed.flagged
	u.retryDelay = max(u.retryDelay, relayed.retryDelay)
	u.loadWait = max(u.loadWait, relayed.loadWait)
	for key, values := range relayed.hintHeader {
		if len(u.hintHeader) >= maxBodyHeaders {
			break
		}
		if u.hintHeader == nil {
			u.hintHeader = http.Header{}
		}
		if u.hintHeader.Get(key) == "" {
			u.hintHeader[key] = values
		}
	}
}

// decodeRelayed reads a relayed document as decodeErrorBody does, arrays
// included, with depth levels of relaying left.
func decodeRelayed(doc []byte, depth int) upstreamError {
	if doc[0] != '[' {
		return decodeObject(doc, depth)
	}
	var list []json.RawMessage
	if json.Unmarshal(doc, &list) == nil {
		for _, item := range list {
			if u := decodeObject(item, depth); u.found {
				return u
			}
		}
	}
	return upstreamError{}
}
