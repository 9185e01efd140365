package chain

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/detourhq/detour/internal/text"
)

// maxRefusalText bounds the part of a refusal quoted in an error text, and
// maxStopReason a stop reason recorded in an attempt: both are outside text.
const (
	maxRefusalText = 120
	maxStopReason  = 64
)

// Stop reasons, compared ignoring case. An answer counts only when it ends
// the way its API documents a complete answer; any other ending is recorded
// in Attempt.StopReason and makes it invalid. stopRefusal is Anthropic's,
// and what the OpenAI adapter records for message.refusal.
const stopRefusal = "refusal"

var (
	// openAIComplete is the finish_reason of a complete chat completion:
	// "stop", "if the model hit a natural stop point or a provided stop
	// sequence" (https://platform.openai.com/docs/api-reference/chat/object).
	// The others it documents ("length", "content_filter", and the tool and
	// function calls that requests without tools never ask for) and
	// OpenRouter's "error" (https://openrouter.ai/docs/api-reference/overview)
	// end an answer that is not the one asked for.
	openAIComplete = []string{"stop"}
	// anthropicComplete are the stop_reason values of a complete message:
	// "end_turn" and "stop_sequence" (https://docs.anthropic.com/en/api/messages).
	// "max_tokens", "model_context_window_exceeded", "refusal", "pause_turn"
	// and "tool_use" (no request carries tools) are not.
	anthropicComplete = []string{"end_turn", "stop_sequence"}
	// truncatedStops cut the answer short: OpenAI's "length", Anthropic's
	// "max_tokens" and "model_context_window_exceeded".
	truncatedStops = []string{"length", "max_tokens", "model_context_window_exceeded"}
	// filteredStops end an answer that a safety filter or the model itself
	// withheld: OpenAI's "content_filter", Anthropic's "refusal", and what
	// gateways pass on from Gemini ("SAFETY", "RECITATION", "BLOCKLIST",
	// "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"), Bedrock
	// ("guardrail_intervened") and others ("sensitive", "content_filtered").
	filteredStops = []string{"content_filter", stopRefusal, "safety", "recitation", "prohibited_content", "blocklist",
		"spii", "image_safety", "guardrail_intervened", "sensitive", "content_filtered"}
)

func stopIn(reasons []string, reason string) bool {
	return slices.ContainsFunc(reasons, func(r string) bool { return strings.EqualFold(r, reason) })
}

// recordedStop is the stop reason an attempt records: "" when complete.
func recordedStop(resp *Response) string {
	if resp.Complete {
		return ""
	}
	return text.Cut(resp.StopReason, maxStopReason)
}

// stopProblem says why an answer that is not complete is no answer: its
// text is a fragment, an apology or a filter's leftover.
func stopProblem(resp *Response) error {
	reason := text.Cut(resp.StopReason, maxStopReason)
	switch {
	case resp.Refusal != "":
		return errors.New("provider refused: " + text.Cut(resp.Refusal, maxRefusalText))
	case strings.EqualFold(reason, stopRefusal):
		return errors.New("provider refused (stop_reason refusal)")
	case stopIn(filteredStops, reason):
		return errors.New("answer stopped by a content filter (stop_reason " + reason + ")")
	case stopIn(truncatedStops, reason):
		return errors.New("answer truncated: the provider stopped for length (stop_reason " + reason + ")")
	case reason == "":
		return errors.New("answer has no stop reason: it may be unfinished")
	}
	return errors.New("answer ended with stop_reason " + strconv.Quote(reason) + ", not a complete ending")
}
