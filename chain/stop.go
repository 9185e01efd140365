package chain

import (
	"errors"
	"slices"
	"strings"

	"github.com/detourhq/detour/internal/text"
)

// maxRefusalText bounds the part of a refusal quoted in an error text, and
// maxStopReason a stop reason recorded in an attempt: both are outside text.
const (
	maxRefusalText = 120
	maxStopReason  = 64
)

// Stop reasons, compared ignoring case. A provider that stopped for any
// other reason than a normal stop is recorded in Attempt.StopReason.
// stopRefusal is the stop reason of an answer the model declined to give:
// Anthropic's stop_reason, and what the OpenAI adapter records when an
// answer carries message.refusal.
const stopRefusal = "refusal"

var (
	normalStops = []string{"", "stop", "end_turn", "stop_sequence"}
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

// isTruncatedStop reports a stop reason that cuts the answer short.
func isTruncatedStop(reason string) bool { return stopIn(truncatedStops, reason) }

// unusualStop is the stop reason an attempt records: reason, or "" for a
// normal stop.
func unusualStop(reason string) string {
	if stopIn(normalStops, reason) {
		return ""
	}
	return text.Cut(reason, maxStopReason)
}

// stopProblem rejects an answer that a filter or a refusal ended: the text
// it has, if any, is a fragment or an apology, not the answer asked for.
func stopProblem(resp *Response) error {
	switch {
	case resp.Refusal != "":
		return errors.New("provider refused: " + text.Cut(resp.Refusal, maxRefusalText))
	case strings.EqualFold(resp.StopReason, stopRefusal):
		return errors.New("provider refused (stop_reason refusal)")
	case stopIn(filteredStops, resp.StopReason):
		return errors.New("answer stopped by a content filter (stop_reason " + resp.StopReason + ")")
	}
	return nil
}
