package wire

import "strings"

// Names of detour's streams and the subjects they capture. Every processor,
// client and operator command uses these; they are part of the contract
// (docs/requests.md, docs/results.md).
const (
	RequestsStream   = "DETOUR_REQUESTS"
	ResultsStream    = "DETOUR_RESULTS"
	DeadLetterStream = "DETOUR_DEADLETTER"

	RequestsPrefix   = "detour.requests."
	ResultsPrefix    = "detour.results."
	DeadLetterPrefix = "detour.deadletter."

	// AskPrefix is where processors serve request/reply: the micro service
	// "detour" has an endpoint on AskPrefix+<chain> for each chain.
	AskPrefix = "detour.ask."
)

// RequestSubject is where requests for chain are published.
func RequestSubject(chain string) string { return RequestsPrefix + chain }

// ResultSubject is where the result of request id is stored.
func ResultSubject(id string) string { return ResultsPrefix + id }

// AskSubject is the request/reply endpoint of chain.
func AskSubject(chain string) string { return AskPrefix + chain }

// IsResultSubject reports whether subject is captured by the results stream.
func IsResultSubject(subject string) bool { return strings.HasPrefix(subject, ResultsPrefix) }

// DeadLetterSubject is where a chain's dead letters go.
func DeadLetterSubject(chain string) string { return DeadLetterPrefix + chain }

// ConsumerName is the durable consumer of a chain on RequestsStream.
func ConsumerName(chain string) string { return "detour-" + chain }
