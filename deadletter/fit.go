package deadletter

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/wire"
)

// Headers added to a dead letter that had to be cut down to fit the server.
const (
	// HeaderOriginalSize is the request body's size in bytes.
	HeaderOriginalSize = "Detour-DLQ-Original-Size"
	// HeaderTrimmed is "true" on a dead letter cut to fit the server's max
	// payload, which cannot be replayed: it no longer holds the request.
	HeaderTrimmed = "Detour-DLQ-Trimmed"
)

// payloadMargin, in bytes below the max payload, absorbs the headers that
// trimming adds.
const payloadMargin = 256

// fit cuts msg down to maxPayload bytes (≤ 0: none known), dropping in
// order the attempts, which leave it replayable, the end of the body, the
// request's own headers and the error's tail. It reports whether it
// trimmed more than the attempts.
func fit(msg *nats.Msg, maxPayload int64) bool {
	if maxPayload <= 0 || wire.PayloadSize(msg) <= maxPayload {
		return false
	}
	limit := max(maxPayload-payloadMargin, 0)
	msg.Header.Del(HeaderAttempts)
	if wire.PayloadSize(msg) <= limit {
		return false
	}
	msg.Header.Set(HeaderOriginalSize, strconv.Itoa(len(msg.Data)))
	msg.Header.Set(HeaderTrimmed, "true")
	if over := wire.PayloadSize(msg) - limit; over > 0 {
		msg.Data = msg.Data[:max(int64(len(msg.Data))-over, 0)]
	}
	if wire.PayloadSize(msg) > limit {
		for k := range msg.Header {
			if !strings.HasPrefix(k, headerDLQPrefix) && k != nats.MsgIdHdr {
				msg.Header.Del(k)
			}
		}
	}
	if wire.PayloadSize(msg) > limit {
		msg.Header.Set(HeaderError, text.Cut(msg.Header.Get(HeaderError), 1000))
	}
	return true
}
