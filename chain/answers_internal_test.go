package chain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// openAIAnswerAtOnce is the chat completion decoded in one pass, nested
// structs and all: what decodeOpenAIAnswer, which decodes a level at a
// time to keep a worker's stack small, must agree with.
type openAIAnswerAtOnce struct {
	Model   looseString `json:"model"`
	Choices []struct {
		Message struct {
			Content string       `json:"content"`
			Refusal *looseString `json:"refusal"`
		} `json:"message"`
		FinishReason looseString `json:"finish_reason"`
	} `json:"choices"`
	Usage lenient[openAIUsage] `json:"usage"`
}

// lenient decodes a T where it can and never fails, as an answer's usage
// is read (decodeUsage).
type lenient[T any] struct{ v T }

func (l *lenient[T]) UnmarshalJSON(b []byte) error {
	_ = json.Unmarshal(b, &l.v)
	return nil
}

// FuzzOpenAIAnswer feeds the chat completion decoder whatever a provider or
// a gateway might answer with a 2xx: no panic; and, unless an object
// repeats a name, an error exactly when the one-pass decode fails and, when
// neither fails, the same model, usage, content, refusal and stop reason.
func FuzzOpenAIAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
		`{"choices":[{"message":{"content":"","refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
		`{"choices":[{"message":{"content":"cut"},"finish_reason":"length"}],"usage":null}`,
		`{"choices":[{"message":{"content":"a"}}],"usage":{"prompt_tokens":12.0,"completion_tokens":1e40}}`, `{"choices":[{"message":{"content":"a"}}],"usage":[1]}`, `{"model":5,"choices":[{"message":{"content":"a","refusal":false},"finish_reason":[1]}]}`,
		`{"choices":[null,{"message":{"content":"second"}}]}`, `{"choices":[{"message":null}]}`,
		`{"choices":[{"message":{"content":"first"}},{"message":5}]}`, `{"choices":[5]}`,
		`{"choices":[{"message":{"refusal":"no"},"message":{"content":"x"}}]}`, `{"choices":[{"message":{"content":5}}]}`, `{"choices":{}}`, `{"choices":[{"message":"x"}]}`,
		`{"error":{"message":"overloaded","code":529}}`, `{}`, `null`, `[]`, ``, `{"choices":[`,
		`{"choices":[{"index":0,"finish_reason":"error","message":{"role":"assistant","content":"The three primary colours of light are red, gre"},"error":{"code":502,"message":"Provider returned error"}}]}`,
		`{"choices":[{"message":{"content":"a"},"finish_reason":null}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, err := decodeOpenAIAnswer(body)
		agreesWithOnePass(t, body, got, err, func(once *openAIAnswerAtOnce) Response {
			want := Response{Model: string(once.Model), Usage: reportedUsage(int(once.Usage.v.PromptTokens), int(once.Usage.v.CompletionTokens))}
			if len(once.Choices) > 0 {
				c := once.Choices[0]
				want.Content, want.StopReason = c.Message.Content, string(c.FinishReason)
				want.Complete = stopIn(openAIComplete, want.StopReason)
				if r := c.Message.Refusal; r != nil && !isBlank(string(*r)) {
					want.Refusal = string(*r)
					if want.Complete {
						want.StopReason, want.Complete = stopRefusal, false
					}
				}
			}
			return want
		})
	})
}

// anthropicAnswerAtOnce is the message decoded in one pass, as
// decodeAnthropicAnswer must agree with.
type anthropicAnswerAtOnce struct {
	Model   looseString `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason looseString             `json:"stop_reason"`
	Usage      lenient[anthropicUsage] `json:"usage"`
}

// FuzzAnthropicAnswer feeds the message decoder whatever a provider or a
// gateway might answer with a 2xx: no panic; and, unless an object repeats
// a name, an error exactly when the one-pass decode fails and, when neither
// fails, the same model, text, stop reason and usage.
func FuzzAnthropicAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`,
		`{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"max_tokens"}`,
		`{"content":[{"type":"text","text":"a"},5]}`, `{"content":[null]}`, `{"content":{}}`, `{"usage":null}`, `{"usage":{"input_tokens":"x"}}`, `{"usage":{"input_tokens":3.5,"output_tokens":-1e400}}`, `{"usage":"n/a"}`, `{"model":{},"stop_reason":7,"content":[{"type":"text","text":"a"}]}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, `{}`, `null`, `[]`, ``, `{"content":[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, err := decodeAnthropicAnswer(body)
		agreesWithOnePass(t, body, got, err, func(once *anthropicAnswerAtOnce) Response {
			var text strings.Builder
			for _, b := range once.Content {
				if b.Type == "text" {
					text.WriteString(b.Text)
				}
			}
			return Response{Content: text.String(), Model: string(once.Model), Complete: stopIn(anthropicComplete, string(once.StopReason)),
				StopReason: string(once.StopReason), Usage: reportedUsage(int(once.Usage.v.InputTokens), int(once.Usage.v.OutputTokens))}
		})
	})
}

// agreesWithOnePass fails t unless a staged decoder's answer got and error
// err agree with body decoded in one pass into a T: an error exactly when
// that fails, else the Response want makes of it. A body that repeats a
// name is not compared (repeatsAName).
func agreesWithOnePass[T any](t *testing.T, body []byte, got Response, err error, want func(*T) Response) {
	t.Helper()
	if repeatsAName(body) {
		return
	}
	var once T
	onceErr := json.Unmarshal(body, &once)
	if (err == nil) != (onceErr == nil) {
		t.Fatalf("error %v, one pass %v, for %q", err, onceErr, body)
	}
	if err != nil {
		return
	}
	if w := want(&once); got != w {
		t.Fatalf("decoded %+v, one pass %+v, for %q", got, w, body)
	}
}

// repeatsAName reports whether an object in body names a member twice,
// reading body up to its end or to where it stops being JSON.
// RFC 8259 (section 4) leaves what that means to the reader: a one-pass
// decode merges the repeats into one struct, the staged decoders keep the
// last of a repeated member they decode on its own, so the fuzz targets do
// not compare the two on such a body.
func repeatsAName(body []byte) bool {
	type level struct {
		names map[string]bool // nil for an array
		name  bool            // the next token is a member's name
	}
	var stack []*level
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].name {
			if name, ok := tok.(string); ok {
				if stack[n-1].names[name] {
					return true
				}
				stack[n-1].names[name], stack[n-1].name = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{names: map[string]bool{}, name: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object around it, if any, names the next one.
		if n := len(stack); n > 0 && stack[n-1].names != nil {
			stack[n-1].name = true
		}
	}
}

func TestRepeatsAName(t *testing.T) {
	for body, want := range map[string]bool{
		`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`: false,
		`{"a":1,"a":2}`:                 true,
		`{"a":{"b":1,"b":2}}`:           true,
		`{"a":[{"b":1},{"c":2,"c":3}]}`: true,
		`{"a":{},"b":[],"a":null}`:      true,
		`[{"a":1},{"a":1}]`:             false,
		`{"a":1,"a"`:                    true,
		`{"a":1,"b"`:                    false,
		`not json`:                      false,
	} {
		if got := repeatsAName([]byte(body)); got != want {
			t.Errorf("repeatsAName(%s) = %t, want %t", body, got, want)
		}
	}
}

// TestDecodeProblemWordsKindsAsRequestErrorsDo: an answer body of the wrong
// shape is described in the words a bad request gets (text.JSONFound and
// text.JSONKind), never with Go's kind names ("array", "bool").
func TestDecodeProblemWordsKindsAsRequestErrorsDo(t *testing.T) {
	var v struct {
		Choices []struct{} `json:"choices"`
		N       int        `json:"n"`
	}
	for body, want := range map[string]string{
		`{"choices":"x"}`: "choices is a string, not a list",
		`{"n":true}`:      "n is true or false, not an integer",
		`{"n":1.5}`:       `n is "1.5", not an integer`,
		`[1]`:             "a list where the API sends an object",
	} {
		err := json.Unmarshal([]byte(body), &v)
		if got := decodeProblem(err); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

// TestLooseStringReadsAsEncodingJSON: a looseString holds what
// encoding/json decodes a JSON string to (escapes, surrogate pairs, bytes
// that are not UTF-8 replaced), its fast path for plain strings included,
// and "" for a value of any other kind.
func TestLooseStringReadsAsEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`"gpt-4o-mini"`, `""`, `"end_turn"`, `"héllo ✓"`, `"a\"b"`, `"tab\there"`, `"\u00e9\ud83d\ude00"`,
		`"\/slash"`, "\"bad \xff byte\"", `"lone \ud800"`, `12`, `null`, `true`, `{"a":"b"}`, `["x"]`,
	} {
		var want string
		if json.Unmarshal([]byte(lit), &want) != nil {
			want = ""
		}
		var got struct {
			V looseString `json:"v"`
		}
		if err := json.Unmarshal([]byte(`{"v":`+lit+`}`), &got); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if string(got.V) != want {
			t.Errorf("%s: looseString %q, want %q", lit, got.V, want)
		}
	}
}
