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
	// ReasonInvalidOutput: every provider called answered, never validly,
	// for DETOUR_MAX_INVALID_DELIVERIES deliveries.
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
	// HeaderOriginalMsgID keeps the request's Nats-Msg-Id; the dead letter
	// has one of its own, by chain and source sequence.
	HeaderOriginalMsgID = "Detour-DLQ-Original-Msg-Id"
)

// HeaderReplayOf marks a replayed request with its dead letter's sequence.
// Not a Detour-DLQ-* header, it stays on a replay dead-lettered again.
const HeaderReplayOf = "Detour-Replay-Of"

// headerDLQPrefix starts every header this package adds to a dead letter.
const headerDLQPrefix = "Detour-DLQ-"

// Letter is one request to dead-letter.
type Letter struct {
	Chain  string
	Reason Reason
	Err    error
	// SourceSeq is the request's sequence in DETOUR_REQUESTS; 0 for one the
	// ask endpoint refused before storing it.
	SourceSeq  uint64
	Deliveries uint64
	Attempts   []chain.Attempt
	Data       []byte
	Header     nats.Header
}

// Publisher writes dead letters.
type Publisher struct{ js jetstream.JetStream }

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// Publish stores a dead letter and returns once the stream acknowledged it;
// only then may the request be terminated.
func (p *Publisher) Publish(ctx context.Context, l Letter) error {
	msg := nats.NewMsg(wire.DeadLetterSubject(l.Chain))
	msg.Data = l.Data
	for k, vs := range l.Header {
		// Detour-DLQ-* headers are this publisher's alone.
		if isPublishDirective(k) || hasPrefixFold(k, headerDLQPrefix) {
			continue
		}
		msg.Header[k] = append([]string(nil), vs...)
	}
	if orig := msg.Header.Get(nats.MsgIdHdr); orig != "" {
		msg.Header.Set(HeaderOriginalMsgID, orig)
	}
	// One dead letter per request message: a redelivery or a retried
	// publish is a duplicate; a replay is a new message.
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
	msg.Header.Set(HeaderTime, time.Now().UTC().Format(time.RFC3339))
	if len(l.Attempts) > 0 {
		attempts, err := json.Marshal(l.Attempts)
		if err != nil {
			return fmt.Errorf("deadletter: encoding attempts: %w", err)
		}
		msg.Header.Set(HeaderAttempts, string(attempts))
	}
	// The added headers may not fit: cut down rather than fail every time.
	fit(msg, p.js.Conn().MaxPayload())
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("deadletter: publishing to %s: %w", msg.Subject, err)
	}
	return nil
}

// isPublishDirective reports whether a header instructs JetStream about the
// request's own publish (Nats-Expected-*, Nats-Rollup, Nats-TTL): copied to
// a dead letter or a replay it would fail that publish or act on another
// stream.
func isPublishDirective(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "nats-expected-") || k == "nats-rollup" || k == "nats-ttl"
}

// oneLine keeps a header value on one line; NATS headers cannot hold newlines.
var oneLine = strings.NewReplacer("\n", " ", "\r", " ").Replace
