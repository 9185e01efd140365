package chain

import (
	"encoding/json"
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
		`{"choices":[5]}`, `{"choices":[{"message":{"content":5}}]}`, `{"choices":{}}`, `{"choices":[{"message":"x"}]}`,
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
