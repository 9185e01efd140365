package wire

import (
	"strconv"

	"github.com/nats-io/nats.go"
)

// A result names the request message it answers, by that message's sequence
// in RequestsStream (header HeaderRequestSeq). Ids are the client's and may
// be reused, and a dead letter's replay is a new message under the same id:
// a redelivery must recognise its own stored answer, and a client its own
// request's, without taking another message's result for it.

// MarkAnswers records on a result's header that it answers the request
// message at sequence requestSeq.
func MarkAnswers(h nats.Header, requestSeq uint64) {
	h.Set(HeaderRequestSeq, strconv.FormatUint(requestSeq, 10))
}

// Answers reports whether the result whose header is h answers the request
// message at sequence requestSeq.
func Answers(h nats.Header, requestSeq uint64) bool {
	return h.Get(HeaderRequestSeq) == strconv.FormatUint(requestSeq, 10)
}
