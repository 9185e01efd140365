package metrics

import (
	"strings"
	"unicode/utf8"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/text"
)

// Outcome is how a delivery was settled: the outcome label of
// detour_requests_total. Its values are those below and, for a request
// dead-lettered, the dead-letter reason (see DeadLettered).
type Outcome string

// The outcomes of a delivery that was not dead-lettered.
const (
	// OutcomeOK: answered by a provider without degradation.
	OutcomeOK Outcome = "ok"
	// OutcomeDegraded: answered, but not by the chain's first choice.
	OutcomeDegraded Outcome = "degraded"
	// OutcomeRetry: handed back for a later delivery; detour_naks_total
	// says why.
	OutcomeRetry Outcome = "retry"
	// OutcomeAlreadyAnswered: a redelivery of a request whose result was
	// already stored, acked without running the chain.
	OutcomeAlreadyAnswered Outcome = "already_answered"
)

// DeadLettered is the outcome of a delivery dead-lettered for reason: the
// reason itself.
func DeadLettered(reason deadletter.Reason) Outcome { return Outcome(reason) }

// Outcomes lists every outcome: those above, then one per dead-letter
// reason.
func Outcomes() []Outcome {
	out := []Outcome{OutcomeOK, OutcomeDegraded, OutcomeRetry, OutcomeAlreadyAnswered}
	for _, r := range deadletter.Reasons() {
		out = append(out, DeadLettered(r))
	}
	return out
}

// NakReason is why a delivery was handed back: the reason label of
// detour_naks_total.
type NakReason string

// The reasons for a NAK.
const (
	// NakAllCooling: every provider of the chain was cooling down; the
	// delivery comes back at the earliest reopen.
	NakAllCooling NakReason = "all_cooling"
	// NakUndecided: the providers called rejected the request itself,
	// and the others that could take it were cooling: it is poison only
	// if they reject it too, and the delivery comes back at the earliest
	// reopen for them to judge it.
	NakUndecided NakReason = "undecided"
	// NakFailures: providers were called and failed; the delivery comes
	// back after a backoff by delivery count.
	NakFailures NakReason = "failures"
	// NakShutdown: the processor is stopping; another takes the delivery
	// at once.
	NakShutdown NakReason = "shutdown"
	// NakError: detour's own JetStream work failed (checking for an
	// earlier result, storing a result or a dead letter); the delivery
	// comes back shortly.
	NakError NakReason = "error"
)

// NakReasons lists every NAK reason.
func NakReasons() []NakReason {
	return []NakReason{NakAllCooling, NakUndecided, NakFailures, NakShutdown, NakError}
}

// list joins label values for a help text: "a, b, c".
func list[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// maxLabelLen bounds a label value taken from outside data, in bytes. A
// model name comes from a provider's answer, and one of a megabyte would be
// kept in every series it labels.
const maxLabelLen = 128

// labelValue makes s fit to be a label value. The registry panics on a
// value that is not valid UTF-8, and chain, provider and model names reach
// the labels from outside (the chain file, a provider's answer): a panic
// while a delivery is settled would stop the processor, so bytes that are
// not UTF-8 become U+FFFD, and a value past maxLabelLen is cut (text.Cut).
func labelValue(s string) string {
	if len(s) <= maxLabelLen && utf8.ValidString(s) {
		return s
	}
	return text.Cut(strings.ToValidUTF8(s, "\uFFFD"), maxLabelLen)
}
