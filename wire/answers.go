package wire

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A result names the request message it answers, by that message's sequence
// in RequestsStream (header HeaderRequestSeq) and the time it was stored
// there (HeaderRequestTime). Ids are the client's and may be reused, a dead
// letter's replay is a new message under the same id, and a request that
// names no id is named by its sequence, which a requests stream created
// again hands out anew: a redelivery must recognise its own stored answer,
// and a client its own request's, without taking another message's result
// for it.

// MarkAnswers records on a result's header that it answers the request
// message stored at sequence requestSeq at time stored (the delivery's
// jetstream.MsgMetadata.Timestamp), in UTC as time.RFC3339Nano writes it
// (trailing zeros of the fraction left out).
func MarkAnswers(h nats.Header, requestSeq uint64, stored time.Time) {
	// One array behind both values, each a slice of one that ends there.
	v := []string{strconv.FormatUint(requestSeq, 10), stored.UTC().Format(time.RFC3339Nano)}
	h[HeaderRequestSeq] = v[0:1:1]
	h[HeaderRequestTime] = v[1:2:2]
}

// Answers reports whether the result whose header is h, itself stored at
// resultStored, answers the request message stored at sequence requestSeq
// at time requestStored. A zero requestStored checks the sequence alone, for
// a client that knows only its publish acknowledgement. A result that
// records no time (one stored by an older processor) answers a message of
// its sequence stored before it, not after: a result cannot precede its
// request; a zero resultStored, unknown, does not rule it out.
func Answers(h nats.Header, resultStored time.Time, requestSeq uint64, requestStored time.Time) bool {
	if h.Get(HeaderRequestSeq) != strconv.FormatUint(requestSeq, 10) {
		return false
	}
	if requestStored.IsZero() {
		return true
	}
	at := h.Get(HeaderRequestTime)
	if at == "" {
		return resultStored.IsZero() || !resultStored.Before(requestStored)
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	return err == nil && t.Equal(requestStored)
}
