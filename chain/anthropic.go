package chain

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
)

// AnthropicVersion is the Messages API version the adapter speaks.
const AnthropicVersion = "2023-06-01"

// anthropicDefaultMaxTokens fills max_tokens, which the Messages API requires,
// when the request sets none.
const anthropicDefaultMaxTokens = 1024

// Anthropic calls the Anthropic Messages API (POST {base}/messages); it
// makes exactly one attempt per Call.
type Anthropic struct{ adapter }

// NewAnthropic returns an adapter for baseURL (for example
// https://api.anthropic.com/v1). A nil client uses DefaultHTTPClient.
func NewAnthropic(name, baseURL, model, apiKey string, client *http.Client) *Anthropic {
	return &Anthropic{newAdapter(name, baseURL, "/messages", model, apiKey, client, encodeAnthropic, decodeAnthropicAnswer)}
}

type anthropicRequest struct {
	Model       string    `json:"model"`
	MaxTokens   int       `json:"max_tokens"`
	System      string    `json:"system,omitempty"`
	Messages    []Message `json:"messages"`
	Temperature *float64  `json:"temperature,omitempty"`
}

// The levels of an answer, decoded one after the other.
type anthropicResponse struct {
	Model      looseString       `json:"model"`
	Content    []json.RawMessage `json:"content"`
	StopReason looseString       `json:"stop_reason"`
	Usage      json.RawMessage   `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  tokenCount `json:"input_tokens"`
	OutputTokens tokenCount `json:"output_tokens"`
}

// encodeAnthropic writes one message request. System messages are joined
// into the top-level system prompt, which is where the Messages API takes
// them.
func encodeAnthropic(a *adapter, req *Request) (any, http.Header) {
	body := anthropicRequest{Model: a.model, MaxTokens: cmp.Or(req.MaxTokens, anthropicDefaultMaxTokens), Temperature: req.Temperature}
	var system []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = append(system, m.Content)
			continue
		}
		body.Messages = append(body.Messages, m)
	}
	body.System = strings.Join(system, "\n\n")
	header := http.Header{"Anthropic-Version": {AnthropicVersion}}
	if a.apiKey != "" {
		header.Set("X-Api-Key", a.apiKey)
	}
	return body, header
}

// decodeAnthropicAnswer reads a message's model, text, stop reason and
// usage, and the first decoding failure; an error object that ended it is
// at the top level, so it returns no part to look in beside. It decodes a
// level at a time (decodeLevel): a block's text decoded with the rest took
// a worker's stack past 8 KiB. Of a member repeated in one object, the
// last counts.
func decodeAnthropicAnswer(data []byte) (Response, json.RawMessage, error) {
	var out anthropicResponse
	decodeErr := json.Unmarshal(data, &out)
	var usage anthropicUsage
	decodeUsage(out.Usage, &usage)
	var text strings.Builder
	for _, raw := range out.Content {
		var block anthropicBlock
		decodeLevel(raw, &block, &decodeErr)
		if block.Type == "text" {
			text.WriteString(block.Text)
		}
	}
	return Response{
		Content:    text.String(),
		Model:      string(out.Model),
		Complete:   stopIn(anthropicComplete, string(out.StopReason)),
		StopReason: string(out.StopReason),
		Usage:      reportedUsage(int(usage.InputTokens), int(usage.OutputTokens)),
	}, nil, decodeErr
}
