package providertest_test

import (
	"encoding/json"
	"testing"

	pt "github.com/detourhq/detour/chain/providertest"
)

// TestReplyUsage checks that a reply's Usage is the usage each flavour
// reports, and that without one the words are counted.
func TestReplyUsage(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.String(), func(t *testing.T) {
			s := pt.New(f, func(int, pt.Request) pt.Reply {
				return pt.Reply{Content: "four words of answer", Usage: &pt.Usage{Prompt: 1234, Completion: 56}}
			})
			defer s.Close()
			in, out := usageOf(t, f, mustSend(t, s, f, body(f, "m", "ping")).body)
			if in != 1234 || out != 56 {
				t.Errorf("usage %d in, %d out; want 1234, 56", in, out)
			}
			s.SetScript(pt.Answer("four words of answer"))
			// The system prompt "be brief" and "ping" make three words.
			in, out = usageOf(t, f, mustSend(t, s, f, body(f, "m", "ping")).body)
			if in != 3 || out != 4 {
				t.Errorf("counted usage %d in, %d out; want 3, 4", in, out)
			}
		})
	}
}

func usageOf(t *testing.T, f pt.Flavor, b []byte) (in, out int) {
	t.Helper()
	var v struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			InputTokens      int `json:"input_tokens"`
			OutputTokens     int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if f == pt.Anthropic {
		return v.Usage.InputTokens, v.Usage.OutputTokens
	}
	return v.Usage.PromptTokens, v.Usage.CompletionTokens
}
