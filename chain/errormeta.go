package chain

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// This file reads what gateways put beside an error's message and type, for
// bodyrules.go and hints.go; every list read is bounded: outside input.

const (
	// maxNames bounds upstreamError.names, which every row of the table reads.
	maxNames = 16
	// maxBodyHeaders bounds the rate-limit headers read from a body.
	maxBodyHeaders = 32
	// maxRelayDepth is how many relayed errors deep (metadata.raw holding
	// another gateway's body) the decoder reads.
	maxRelayDepth = 2
)

// addName keeps name, within maxNames.
func (u *upstreamError) addName(name string) {
	if name != "" && len(u.names) < maxNames {
		u.names = append(u.names, name)
	}
}

// readDetails reads Google's details list (https://cloud.google.com/apis/design/errors):
// google.rpc.RetryInfo's retryDelay ("30s") and google.rpc.ErrorInfo's
// reason ("API_KEY_INVALID"), more precise than the status.
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

// readReasons reads Google's older errors[].reason ("rateLimitExceeded")
// and Azure OpenAI's innererror.code ("ResponsibleAIPolicyViolation").
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
// (https://openrouter.ai/docs/api-reference/errors).
type openRouterMetadata struct {
	Reasons      []json.RawMessage          `json:"reasons"`
	FlaggedInput json.RawMessage            `json:"flagged_input"`
	Raw          json.RawMessage            `json:"raw"`
	Headers      map[string]json.RawMessage `json:"headers"`
	ErrorType    json.RawMessage            `json:"error_type"`
}

// readMetadata reads an OpenRouter metadata object.
func (u *upstreamError) readMetadata(raw json.RawMessage, depth int) {
	var m openRouterMetadata
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return
	}
	u.flagged = len(m.Reasons) > 0 || jsonString(m.FlaggedInput) != ""
	u.addName(jsonString(m.ErrorType))
	for key, value := range m.Headers {
		if v := jsonString(value); v != "" {
			u.addHintHeader(http.CanonicalHeaderKey(key), []string{v})
		}
	}
	u.readRelayed(m.Raw, depth)
}

// addHintHeader keeps a relayed header the body has not named yet, within
// maxBodyHeaders.
func (u *upstreamError) addHintHeader(key string, values []string) {
	if len(u.hintHeader) >= maxBodyHeaders || u.hintHeader.Get(key) != "" {
		return
	}
	if u.hintHeader == nil {
		u.hintHeader = http.Header{}
	}
	u.hintHeader[key] = values
}

// readRelayed reads the upstream error a gateway relays, a JSON document
// (as a string or an object) or plain text: its names and hints join the
// body's, its message becomes the detail.
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
		relayed = decodeDocument(doc, depth-1)
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
		u.addHintHeader(key, values)
	}
}
