package wire

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A result names the request message it answers by its sequence and store
// time in RequestsStream: ids may be reused, a replay is a new message under
// the same id, and a stream created again hands sequences out anew.

// MarkAnswers records on a result's header that it answers the request
// message stored at sequence requestSeq at time stored (the delivery's
// metadata Timestamp), in UTC as time.RFC3339Nano writes it.
func MarkAnswers(h nats.Header, requestSeq uint64, stored time.Time) {
	// One array behind both values, each a slice of one that ends there.
	v := []string{strconv.FormatUint(requestSeq, 10), stored.UTC().Format(time.RFC3339Nano)}
	h[HeaderRequestSeq] = v[0:1:1]
	h[HeaderRequestTime] = v[1:2:2]
}

// Answers reports whether the result whose header is h, stored at
// resultStored, answers the request message stored at requestSeq at
// requestStored (zero: the sequence alone). A result recording no time (an
// older processor's) answers one stored before it, or when that is unknown.
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
