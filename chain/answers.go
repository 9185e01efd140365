package chain

import "encoding/json"

// decodeLevel decodes raw, one level of an answer left as json.RawMessage,
// into v, when raw holds anything, and keeps the error in *first unless an
// earlier one is there. Answers are decoded a level at a time
// (decodeOpenAIAnswer, decodeAnthropicAnswer): encoding/json's decoder
// spends about 1 KiB of stack per level of nesting, on the stack of a
// worker that must stay within 8 KiB while it decodes (Chain.Run).
func decodeLevel(raw json.RawMessage, v any, first *error) {
	if len(raw) == 0 {
		return
	}
	if err := json.Unmarshal(raw, v); err != nil && *first == nil {
		*first = err
	}
}
