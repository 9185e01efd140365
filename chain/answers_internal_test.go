package chain

import (
	"encoding/json"
	"strings"
	"testing"
)

// openAIAnswerAtOnce is the chat completion decoded in one pass, nested
// structs and all: what decodeOpenAIAnswer, which decodes a level at a
// time to keep a worker's stack small, must agree with.
type openAIAnswerAtOnce struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string  `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// FuzzOpenAIAnswer feeds the chat completion decoder whatever a provider or
// a gateway might answer with a 2xx: no panic; an error exactly when the
// one-pass decode fails; and, when neither fails, the same model, usage,
// content, refusal and stop reason.
func FuzzOpenAIAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
		`{"choices":[{"message":{"content":"","refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"content":"cut"},"finish_reason":"length"}],"usage":null}`,
		`{"choices":[null,{"message":{"content":"second"}}]}`, `{"choices":[{"message":null}]}`,
		`{"choices":[{"message":{"content":"first"}},{"message":5}]}`, `{"choices":[5]}`, `{"choices":[{"message":{"content":5}}]}`, `{"choices":{}}`, `{"choices":[{"message":"x"}]}`,
		`{"error":{"message":"overloaded","code":529}}`, `{}`, `null`, `[]`, ``, `{"choices":[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeOpenAIAnswer(body)
		var once openAIAnswerAtOnce
		onceErr := json.Unmarshal(body, &once)
		if (err == nil) != (onceErr == nil) {
			t.Fatalf("error %v, one pass %v, for %q", err, onceErr, body)
		}
		if err != nil {
			return
		}
		want := Response{Model: once.Model, Usage: reportedUsage(once.Usage.PromptTokens, once.Usage.CompletionTokens)}
		if len(once.Choices) > 0 {
			c := once.Choices[0]
			want.Content, want.StopReason, want.Truncated = c.Message.Content, c.FinishReason, isTruncatedStop(c.FinishReason)
			if r := c.Message.Refusal; r != nil && !isBlank(*r) {
				want.Refusal = *r
				if unusualStop(want.StopReason) == "" {
					want.StopReason = stopRefusal
				}
			}
		}
		if got != want {
			t.Fatalf("decoded %+v, one pass %+v, for %q", got, want, body)
		}
	})
}

// anthropicAnswerAtOnce is the message decoded in one pass, as
// decodeAnthropicAnswer must agree with.
type anthropicAnswerAtOnce struct {
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// FuzzAnthropicAnswer feeds the message decoder whatever a provider or a
// gateway might answer with a 2xx: no panic; an error exactly when the
// one-pass decode fails; and, when neither fails, the same model, text,
// stop reason and usage.
func FuzzAnthropicAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`,
		`{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"max_tokens"}`,
		`{"content":[{"type":"text","text":"a"},5]}`, `{"content":[null]}`, `{"content":{}}`, `{"usage":null}`, `{"usage":{"input_tokens":"x"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, `{}`, `null`, `[]`, ``, `{"content":[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeAnthropicAnswer(body)
		var once anthropicAnswerAtOnce
		onceErr := json.Unmarshal(body, &once)
		if (err == nil) != (onceErr == nil) {
			t.Fatalf("error %v, one pass %v, for %q", err, onceErr, body)
		}
		if err != nil {
			return
		}
		var text strings.Builder
		for _, b := range once.Content {
			if b.Type == "text" {
				text.WriteString(b.Text)
			}
		}
		want := Response{Content: text.String(), Model: once.Model, Truncated: isTruncatedStop(once.StopReason),
			StopReason: once.StopReason, Usage: reportedUsage(once.Usage.InputTokens, once.Usage.OutputTokens)}
		if got != want {
			t.Fatalf("decoded %+v, one pass %+v, for %q", got, want, body)
		}
	})
}
