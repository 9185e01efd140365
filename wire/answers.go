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

// Answers reports whether the result whose header is h answers the request
// message stored at sequence requestSeq at time stored. A zero stored checks
// the sequence alone, for a client that knows only its publish
// acknowledgement; so does a result that records no time (one stored by an
// older processor).
func Answers(h nats.Header, requestSeq uint64, stored time.Time) bool {
	if h.Get(HeaderRequestSeq) != strconv.FormatUint(requestSeq, 10) {
		return false
	}
	at := h.Get(HeaderRequestTime)
	if at == "" || stored.IsZero() {
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	return err == nil && t.Equal(stored)
}
