package stream

import (
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
)

// Observer is told what the consume loop does with each delivery; the
// metrics implement it from outside. Its methods are called from every
// worker at once and must not block.
type Observer interface {
	// Settled counts a delivery's outcome.
	Settled(chain string, outcome Outcome)
	// Attempts reports a run's provider calls and skips.
	Attempts(attempts []chain.Attempt)
	// Usage reports an answer's tokens and cost.
	Usage(res chain.Result)
	// Answered reports a result stored now, sincePublished after its
	// request was published.
	Answered(chain string, sincePublished time.Duration, now time.Time, degraded bool)
	// Nak reports a delivery handed back for later.
	Nak(chain string, reason NakReason)
	// DeadLetter reports a dead-lettered request.
	DeadLetter(chain string, reason deadletter.Reason)
	// InFlight moves the count of deliveries being worked on by delta.
	InFlight(delta int)
}

// nobody is the Observer of a processor given none.
type nobody struct{}

func (nobody) Settled(string, Outcome)                         {}
func (nobody) Attempts([]chain.Attempt)                        {}
func (nobody) Usage(chain.Result)                              {}
func (nobody) Answered(string, time.Duration, time.Time, bool) {}
func (nobody) Nak(string, NakReason)                           {}
func (nobody) DeadLetter(string, deadletter.Reason)            {}
func (nobody) InFlight(int)                                    {}

// Outcome is how a delivery was settled, the outcome label of
// detour_requests_total: those below, or a dead-letter reason.
type Outcome string

// The outcomes of a delivery that was not dead-lettered.
const (
	OutcomeOK       Outcome = "ok"
	OutcomeDegraded Outcome = "degraded" // not by the chain's first choice
	// OutcomeRetry: handed back; detour_naks_total says why.
	OutcomeRetry Outcome = "retry"
	// OutcomeAlreadyAnswered: acked without running the chain, its result
	// already stored.
	OutcomeAlreadyAnswered Outcome = "already_answered"
)

// DeadLettered is the outcome of a delivery dead-lettered for reason.
func DeadLettered(reason deadletter.Reason) Outcome { return Outcome(reason) }

// Outcomes lists every outcome, dead-letter reasons last.
func Outcomes() []Outcome {
	out := []Outcome{OutcomeOK, OutcomeDegraded, OutcomeRetry, OutcomeAlreadyAnswered}
	for _, r := range deadletter.Reasons() {
		out = append(out, DeadLettered(r))
	}
	return out
}

// NakReason is why a delivery was handed back: the reason label of
// detour_naks_total (docs/commands.md).
type NakReason string

// The reasons for a NAK.
const (
	// NakAllCooling: every provider was cooling; back at the earliest
	// reopen.
	NakAllCooling NakReason = "all_cooling"
	// NakUndecided: the providers called rejected the request, and those
	// cooling must judge it too; back at the earliest reopen.
	NakUndecided NakReason = "undecided"
	// NakFailures: providers failed; back after a backoff.
	NakFailures NakReason = "failures"
	// NakShutdown: the processor is stopping; another takes it at once.
	NakShutdown NakReason = "shutdown"
	// NakError: detour's own JetStream work failed; back shortly.
	NakError NakReason = "error"
)

// NakReasons lists every NAK reason.
func NakReasons() []NakReason {
	return []NakReason{NakAllCooling, NakUndecided, NakFailures, NakShutdown, NakError}
}
