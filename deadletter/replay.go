package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/wire"
)

// ErrDeadlinePassed: the request's deadline has passed, and replayed as it
// is it would only expire again; give ReplayOptions.Deadline.
var ErrDeadlinePassed = errors.New("request deadline has passed")

// ReplayOptions change what a replay republishes.
type ReplayOptions struct {
	// Deadline, when not zero, replaces the body's "deadline". A request
	// without one gets DETOUR_REQUEST_TTL from its new publication anyway.
	Deadline time.Time
}

// Replayed tells what a replay did.
type Replayed struct {
	Seq       uint64 `json:"seq"` // the dead letter's, removed
	Chain     string `json:"chain"`
	RequestID string `json:"id"`
	// Subject and StreamSeq are where the request was queued again.
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	// MsgID is the Nats-Msg-Id republished with: the original, or
	// "<original or id>-replay-<seq>" (see Replay).
	MsgID string `json:"msg_id"`
	// AlreadyQueued: an earlier replay of this dead letter was queued
	// under MsgID, and nothing was queued twice.
	AlreadyQueued bool `json:"already_queued,omitempty"`
	// BodyChanged: a new deadline or the id was written into the body.
	BodyChanged bool `json:"body_changed,omitempty"`
}

// Replay republishes the request of dead letter seq to
// detour.requests.<chain>, with the headers and Nats-Msg-Id of
// docs/failures.md#replay, and removes the dead letter once the stream
// acknowledged it: a failed publish leaves it. A passed deadline is
// ErrDeadlinePassed unless opts.Deadline gives a new one.
func (s *Store) Replay(ctx context.Context, seq uint64, opts ReplayOptions) (Replayed, error) {
	m, err := s.Get(ctx, seq)
	if err != nil {
		return Replayed{}, err
	}
	return s.replay(ctx, m, opts)
}

// ReplayAll replays every dead letter f selects, oldest first. A failed one
// stays and does not stop the others; the errors are joined.
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

// ReplaySelected replays the dead letters sel names, as ReplayAll does,
// and returns those that succeeded.
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
		body, err = setFields(body, m.Header, map[string]string{"deadline": opts.Deadline.UTC().Format(time.RFC3339)})
		if err != nil {
			return fail("cannot set a new deadline: %w", err)
		}
		r.BodyChanged = true
	} else if t, ok := wire.ParseDeadline(fields.Deadline); ok && !time.Now().Before(t) {
		return fail("%w (%s); give it a new deadline", ErrDeadlinePassed, fields.Deadline)
	}

	origMsgID := m.Header.Get(HeaderOriginalMsgID)
	header := replayHeader(m.Header, m.Seq)
	// ownID switches to the replay's own Nats-Msg-Id.
	ownID := func() {
		r.MsgID = cmp.Or(origMsgID, m.RequestID, "dlq") + "-replay-" + strconv.FormatUint(m.Seq, 10)
		if fields.ID != "" || m.RequestID == "" {
			return
		}
		// The id came from the Nats-Msg-Id or the sequence, which change.
		if rewritten, err := setFields(body, m.Header, map[string]string{"id": m.RequestID}); err == nil {
			body, r.BodyChanged = rewritten, true
		} else {
			r.RequestID = r.MsgID // a body with no fields is refused again anyway
		}
	}
	r.MsgID = origMsgID
	if origMsgID == "" {
		ownID()
	}
	ack, err := s.publish(ctx, r.Subject, header, body, r.MsgID)
	if err != nil {
		return fail("%w", err)
	}
	if ack.Duplicate && r.MsgID == origMsgID {
		// The duplicate window holds the id: only an earlier replay of this
		// dead letter means the request is queued.
		ours, err := s.replays(ctx, ack.Sequence, m.Seq)
		if err != nil {
			return fail("%w", err)
		}
		if !ours {
			ownID()
			if ack, err = s.publish(ctx, r.Subject, header, body, r.MsgID); err != nil {
				return fail("%w", err)
			}
		}
	}
	r.StreamSeq, r.AlreadyQueued = ack.Sequence, ack.Duplicate
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

// replays reports whether the requests stream's message at seq replays the
// dead letter letterSeq. One gone (taken) counts as not: queueing again
// costs at most a second answer, taking it for queued could lose it.
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

// publish publishes a replayed request with msgID.
func (s *Store) publish(ctx context.Context, subject string, header nats.Header, body []byte, msgID string) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = body
	maps.Copy(msg.Header, header)
	msg.Header.Set(nats.MsgIdHdr, msgID)
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return ack, nil
}

// replayHeader is a dead letter's header without the Detour-DLQ-* ones, its
// Nats-Msg-Id and publish directives, with Detour-Replay-Of.
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
