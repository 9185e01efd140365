package deadletter

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/internal/text"
)

// Headers added to a dead letter that had to be cut down to fit the server.
const (
	// HeaderOriginalSize is the request body's size in bytes when the dead
	// letter holds less of it.
	HeaderOriginalSize = "Detour-DLQ-Original-Size"
	// HeaderTrimmed is set ("true") on a dead letter whose body, attempts or
	// original headers were cut to fit the server's max payload. Such a
	// dead letter cannot be replayed: what it holds is not the request.
	HeaderTrimmed = "Detour-DLQ-Trimmed"
)

// payloadMargin is kept free below the server's max payload. The size
// counted here is the one the client checks (headers and body); the margin
// absorbs the header lines that trimming itself adds.
const payloadMargin = 256

// fit cuts msg down until its headers and body fit in maxPayload bytes, so
// that a request too large to be stored whole is still dead-lettered with
// its reason rather than retried until it vanishes. It drops, in order, the
// attempt list, the end of the body, and the request's own headers (the
// body first would make a dead letter unreplayable where dropping the
// attempts was enough); it reports whether the body or the request's
// headers were cut. maxPayload ≤ 0 means no limit is known.
func fit(msg *nats.Msg, maxPayload int64) bool {
	if maxPayload <= 0 || payloadSize(msg) <= maxPayload {
		return false
	}
	limit := max(maxPayload-payloadMargin, 0)
	msg.Header.Del(HeaderAttempts)
	if payloadSize(msg) <= limit {
		return false
	}
	msg.Header.Set(HeaderOriginalSize, strconv.Itoa(len(msg.Data)))
	msg.Header.Set(HeaderTrimmed, "true")
	if over := payloadSize(msg) - limit; over > 0 {
		msg.Data = msg.Data[:max(int64(len(msg.Data))-over, 0)]
	}
	if payloadSize(msg) > limit {
		for k := range msg.Header {
			if !strings.HasPrefix(k, headerDLQPrefix) && k != nats.MsgIdHdr {
				msg.Header.Del(k)
			}
		}
	}
	if payloadSize(msg) > limit {
		msg.Header.Set(HeaderError, text.Cut(msg.Header.Get(HeaderError), 1000))
	}
	return true
}

// payloadSize is what the server counts against its max payload: the
// encoded headers and the body.
func payloadSize(msg *nats.Msg) int64 {
	return int64(msg.Size() - len(msg.Subject) - len(msg.Reply))
}
