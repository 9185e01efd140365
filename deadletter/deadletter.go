package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// Reason says why a request was dead-lettered.
type Reason string

// The dead-letter reasons of docs/failures.md.
const (
	ReasonBadRequest      Reason = "bad_request"
	ReasonBadReplySubject Reason = "bad_reply_subject"
	ReasonTooLarge        Reason = "too_large"
	ReasonExpired         Reason = "expired"
	ReasonPoison          Reason = "poison"
	// ReasonInvalidOutput: every provider called answered, but never validly
	// (empty, cut short, filtered, refused, or against response_schema), for
	// DETOUR_MAX_INVALID_DELIVERIES deliveries in a row.
	ReasonInvalidOutput Reason = "invalid_output"
)

// Header names added to a dead letter.
const (
	HeaderReason     = "Detour-DLQ-Reason"
	HeaderError      = "Detour-DLQ-Error"
	HeaderSourceSeq  = "Detour-DLQ-Source-Seq"
	HeaderDeliveries = "Detour-DLQ-Deliveries"
	HeaderTime       = "Detour-DLQ-Time"
	HeaderAttempts   = "Detour-DLQ-Attempts"
	// HeaderOriginalMsgID keeps the request's Nats-Msg-Id. The dead letter
	// itself gets a Nats-Msg-Id of its own (chain and source sequence), so a
	// request dead-lettered again after a replay is not dropped as a
	// duplicate, while a retried publish of the same dead letter is.
	HeaderOriginalMsgID = "Detour-DLQ-Original-Msg-Id"
)

// HeaderReplayOf marks a request republished from a dead letter with that
// dead letter's sequence. It is not a Detour-DLQ-* header, so it stays on a
// replayed request that is dead-lettered again and shows where it came from.
const HeaderReplayOf = "Detour-Replay-Of"

// headerDLQPrefix starts every header this package adds to a dead letter.
const headerDLQPrefix = "Detour-DLQ-"

// Letter is one request to dead-letter.
type Letter struct {
	Chain  string
	Reason Reason
	Err    error
	// SourceSeq is the request's sequence in DETOUR_REQUESTS: one dead
	// letter per request message. 0 for a request refused before it was
	// stored (by the ask endpoint), whose dead letter is never a duplicate.
	SourceSeq  uint64
	Deliveries uint64
	Attempts   []chain.Attempt
	Data       []byte
	Header     nats.Header
}

// Publisher writes dead letters.
type Publisher struct {
	js  jetstream.JetStream
	now func() time.Time
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher {
	return &Publisher{js: js, now: time.Now}
}

// Publish stores a dead letter and returns once the stream has acknowledged
// it; only then may the request be terminated.
func (p *Publisher) Publish(ctx context.Context, l Letter) error {
	msg := nats.NewMsg(wire.DeadLetterSubject(l.Chain))
	msg.Data = l.Data
	for k, vs := range l.Header {
		// Detour-DLQ-* headers are this publisher's account of the dead
		// letter: a request's own would be read as part of it.
		if isPublishDirective(k) || hasPrefixFold(k, headerDLQPrefix) {
			continue
		}
		msg.Header[k] = append([]string(nil), vs...)
	}
	if orig := msg.Header.Get(nats.MsgIdHdr); orig != "" {
		msg.Header.Set(HeaderOriginalMsgID, orig)
	}
	// One dead letter per request message: a redelivery after a crash, or
	// a retried publish that did land, is deduplicated. A replay is a new
	// request message, so it can be dead-lettered again.
	id := fmt.Sprintf("dlq-%s-%d", l.Chain, l.SourceSeq)
	if l.SourceSeq == 0 { // never stored: nothing to deduplicate against
		id = fmt.Sprintf("dlq-%s-%s", l.Chain, nuid.Next())
	}
	msg.Header.Set(nats.MsgIdHdr, id)
	msg.Header.Set(HeaderReason, string(l.Reason))
	if l.Err != nil {
		msg.Header.Set(HeaderError, oneLine(l.Err.Error()))
	}
	msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(l.SourceSeq, 10))
	msg.Header.Set(HeaderDeliveries, strconv.FormatUint(l.Deliveries, 10))
	msg.Header.Set(HeaderTime, p.now().UTC().Format(time.RFC3339))
	if len(l.Attempts) > 0 {
		attempts, err := json.Marshal(l.Attempts)
		if err != nil {
			return fmt.Errorf("deadletter: encoding attempts: %w", err)
		}
		msg.Header.Set(HeaderAttempts, string(attempts))
	}
	// The request fitted the server, but the headers added here may not:
	// cut it down rather than fail to store it on every delivery.
	fit(msg, p.js.Conn().MaxPayload())
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("deadletter: publishing to %s: %w", msg.Subject, err)
	}
	return nil
}

// isPublishDirective reports whether a header is an instruction to JetStream
// for one publish (an expected stream or last sequence, a rollup, a message
// TTL) rather than part of the message. Such a header was meant for the
// request's own publish: copied onto the dead letter or a replay it would
// make that publish fail (wrong expected stream) or act on another stream,
// so it is left out.
func isPublishDirective(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "nats-expected-") || k == "nats-rollup" || k == "nats-ttl"
}

// oneLine keeps a header value on one line; NATS headers cannot hold newlines.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
