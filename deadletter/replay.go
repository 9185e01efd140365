package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/wire"
)

// ErrDeadlinePassed is returned when a dead letter's request names a
// deadline that has passed: replayed as it is, it would only expire again.
// Replay it with ReplayOptions.Deadline.
var ErrDeadlinePassed = errors.New("request deadline has passed")

// ReplayOptions change what a replay republishes.
type ReplayOptions struct {
	// Deadline, when not zero, replaces the request body's "deadline"
	// field, so that an expired request gets another chance. The zero
	// value republishes the body unchanged; a request without a "deadline"
	// field gets a fresh DETOUR_REQUEST_TTL from its new publish time anyway
	// (and no request outlives that age, whatever its deadline).
	Deadline time.Time
}

// Replayed tells what a replay did.
type Replayed struct {
	// Seq is the dead letter's sequence; it has been removed.
	Seq       uint64 `json:"seq"`
	Chain     string `json:"chain"`
	RequestID string `json:"id"`
	// Subject and StreamSeq are where the request was queued again.
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	// MsgID is the Nats-Msg-Id the request was republished with: the
	// original one, or "<original or id>-replay-<seq>" when there was none
	// or the original was still inside the requests stream's duplicate
	// window.
	MsgID string `json:"msg_id"`
	// AlreadyQueued reports that the stream already held the request under
	// that Nats-Msg-Id (an earlier replay whose acknowledgement was lost,
	// or the client sending it again), so nothing was queued twice.
	AlreadyQueued bool `json:"already_queued,omitempty"`
	// BodyChanged reports that the body was rewritten: a new deadline, or
	// the request id written into a body without one (see Replay).
	BodyChanged bool `json:"body_changed,omitempty"`
}

// Replay republishes the request of dead letter seq to
// detour.requests.<chain> and removes the dead letter once the stream has
// acknowledged the request. A dead letter is never lost: when the publish
// fails, it stays and the error is returned.
//
// The request goes back with its original body and headers, minus the
// Detour-DLQ-* headers, with its original Nats-Msg-Id restored and
// Detour-Replay-Of: <seq> added. The requests stream drops a Nats-Msg-Id it
// saw in the last two minutes, which a request dead-lettered at once
// (bad_request, poison, a past deadline) usually is; when the stream answers
// that the original request is such a duplicate, the request is published
// again as "<original>-replay-<seq>". That id is fixed per dead letter, so a
// replay retried after a lost acknowledgement is still queued only once. When
// the request had no Nats-Msg-Id, it gets that fixed id from the start. When
// the Nats-Msg-Id (or, without one, the stream sequence) was the request's
// id because the body has none, the id is written into the body, so the
// request keeps its id and its result lands where its requester waits.
//
// A request whose body names a deadline that has passed is refused with
// ErrDeadlinePassed unless opts.Deadline gives a new one.
func (s *Store) Replay(ctx context.Context, seq uint64, opts ReplayOptions) (Replayed, error) {
	m, err := s.Get(ctx, seq)
	if err != nil {
		return Replayed{}, err
	}
	return s.replay(ctx, m, opts)
}

// ReplayAll replays every dead letter f selects, oldest first. A failed
// replay leaves its dead letter in place and does not stop the others; the
// errors are joined.
func (s *Store) ReplayAll(ctx context.Context, f Filter, opts ReplayOptions) ([]Replayed, error) {
	var done []Replayed
	var errs []error
	err := s.each(ctx, f, func(m Message) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := s.replay(ctx, m, opts)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		done = append(done, r)
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// ReplaySelected replays the dead letters sel names: those of sel.Seqs in
// that order, else every one sel.Filter selects (ReplayAll). A failed replay
// leaves its dead letter in place and does not stop the others; the errors
// are joined, and the replays that succeeded are returned.
func (s *Store) ReplaySelected(ctx context.Context, sel Selection, opts ReplayOptions) ([]Replayed, error) {
	if err := sel.validate(); err != nil {
		return nil, err
	}
	if len(sel.Seqs) == 0 {
		return s.ReplayAll(ctx, sel.Filter, opts)
	}
	var done []Replayed
	err := eachSeq(ctx, sel.Seqs, func(seq uint64) error {
		r, err := s.Replay(ctx, seq, opts)
		if err == nil {
			done = append(done, r)
		}
		return err
	})
	return done, err
}

func (s *Store) replay(ctx context.Context, m Message, opts ReplayOptions) (Replayed, error) {
	fail := func(format string, args ...any) (Replayed, error) {
		return Replayed{}, fmt.Errorf("deadletter: replaying %d: "+format, append([]any{m.Seq}, args...)...)
	}
	if m.Chain == "" || strings.ContainsAny(m.Chain, ".*>") {
		return fail("stored under an unexpected subject %q", wire.DeadLetterSubject(m.Chain))
	}
	if m.Header.Get(HeaderTrimmed) != "" {
		return fail("it was cut down to fit the server (original body %s bytes, %d kept), so it no longer holds the request",
			cmp.Or(m.Header.Get(HeaderOriginalSize), "?"), len(m.Data))
	}
	r := Replayed{Seq: m.Seq, Chain: m.Chain, RequestID: m.RequestID, Subject: wire.RequestSubject(m.Chain)}
	fields := readFields(m.Data, m.Header)
	body := m.Data
	if !opts.Deadline.IsZero() {
		var err error
		body, err = setFields(body, m.Header, map[string]string{fieldDeadline: opts.Deadline.UTC().Format(time.RFC3339)})
		if err != nil {
			return fail("cannot set a new deadline: %w", err)
		}
		r.BodyChanged = true
	} else if t, ok := wire.ParseDeadline(fields.Deadline); ok && !s.now().Before(t) {
		return fail("%w (%s); give it a new deadline", ErrDeadlinePassed, fields.Deadline)
	}

	origMsgID := m.Header.Get(HeaderOriginalMsgID)
	header := replayHeader(m.Header, m.Seq)
	// ownID switches to a Nats-Msg-Id of this replay's own, fixed per dead
	// letter so that retrying the replay cannot queue the request twice.
	ownID := func() {
		base := origMsgID
		if base == "" {
			base = cmp.Or(m.RequestID, "dlq")
		}
		r.MsgID = base + "-replay-" + strconv.FormatUint(m.Seq, 10)
		if fields.ID != "" || m.RequestID == "" {
			return
		}
		// The request's id came from its Nats-Msg-Id or its sequence, and
		// both change now: move the id into the body.
		if rewritten, err := setFields(body, m.Header, map[string]string{fieldID: m.RequestID}); err == nil {
			body, r.BodyChanged = rewritten, true
		} else {
			r.RequestID = r.MsgID // a body with no fields is refused again anyway
		}
	}
	r.MsgID = origMsgID
	if origMsgID == "" {
		ownID()
	}
	ack, dup, err := s.publish(ctx, r.Subject, header, body, r.MsgID)
	if err != nil {
		return fail("%w", err)
	}
	if dup && r.MsgID == origMsgID {
		// The stream remembers the id in its duplicate window: for the
		// original request, for another request that reused the id since,
		// or for an earlier replay of this dead letter. Only the last
		// means the request is queued; otherwise queue it under the
		// replay's own id, which a retried replay is a duplicate of.
		ours, err := s.replays(ctx, ack.Sequence, m.Seq)
		if err != nil {
			return fail("%w", err)
		}
		if !ours {
			ownID()
			if ack, dup, err = s.publish(ctx, r.Subject, header, body, r.MsgID); err != nil {
				return fail("%w", err)
			}
		}
	}
	r.StreamSeq, r.AlreadyQueued = ack.Sequence, dup
	str, err := s.stream(ctx)
	if err == nil {
		err = deleteMsg(ctx, str, m.Seq)
	}
	if err != nil && !errors.Is(err, ErrNotFound) { // not found: a concurrent replay removed it
		return r, fmt.Errorf("deadletter: dead letter %d was queued again as %s sequence %d, but removing it failed (delete it rather than replaying it again): %w",
			m.Seq, r.Subject, r.StreamSeq, err)
	}
	return r, nil
}

// replays reports whether the requests stream's message at seq is a replay
// of the dead letter letterSeq. A message no longer there (taken and acked)
// cannot tell: it counts as not one, since queueing a request again costs
// at most a second answer, where taking it for queued would lose it.
func (s *Store) replays(ctx context.Context, seq, letterSeq uint64) (bool, error) {
	str, err := s.js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		return false, fmt.Errorf("reading stream %s: %w", wire.RequestsStream, err)
	}
	msg, err := str.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %s sequence %d: %w", wire.RequestsStream, seq, err)
	}
	return msg.Header.Get(HeaderReplayOf) == strconv.FormatUint(letterSeq, 10), nil
}

// publish publishes a replayed request with msgID and reports whether the
// stream dropped it as a duplicate.
func (s *Store) publish(ctx context.Context, subject string, header nats.Header, body []byte, msgID string) (*jetstream.PubAck, bool, error) {
	msg := nats.NewMsg(subject)
	msg.Data = body
	for k, vs := range header {
		msg.Header[k] = vs
	}
	msg.Header.Set(nats.MsgIdHdr, msgID)
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, false, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return ack, ack.Duplicate, nil
}

// replayHeader is a dead letter's header as the request had it: without the
// Detour-DLQ-* headers, the dead letter's own Nats-Msg-Id and any publish
// directive, and with Detour-Replay-Of naming the dead letter.
func replayHeader(h nats.Header, seq uint64) nats.Header {
	out := nats.Header{}
	for k, vs := range h {
		if hasPrefixFold(k, headerDLQPrefix) || strings.EqualFold(k, nats.MsgIdHdr) || isPublishDirective(k) {
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	out.Set(HeaderReplayOf, strconv.FormatUint(seq, 10))
	return out
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
