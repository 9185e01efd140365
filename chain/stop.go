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
	// openAIComplete is the finish_reason of a complete chat completion
	// (https://platform.openai.com/docs/api-reference/chat/object); the
	// others, and OpenRouter's "error"
	// (https://openrouter.ai/docs/api-reference/overview), are not.
	openAIComplete = []string{"stop"}
	// anthropicComplete are the stop_reason values of a complete message
	// (https://docs.anthropic.com/en/api/messages); "max_tokens",
	// "refusal", "pause_turn", "tool_use" and the others are not.
	anthropicComplete = []string{"end_turn", "stop_sequence"}
	// truncatedStops cut the answer short (OpenAI's, then Anthropic's).
	truncatedStops = []string{"length", "max_tokens", "model_context_window_exceeded"}
	// filteredStops end an answer a safety filter or the model withheld:
	// OpenAI's, Anthropic's, and what gateways pass on from Gemini ("safety"
	// to "image_safety"), Bedrock ("guardrail_intervened") and others.
	filteredStops = []string{"content_filter", stopRefusal, "safety", "recitation", "prohibited_content", "blocklist",
		"spii", "image_safety", "guardrail_intervened", "sensitive", "content_filtered"}
)

func stopIn(reasons []string, reason string) bool {
	return slices.ContainsFunc(reasons, func(r string) bool { return strings.EqualFold(r, reason) })
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
