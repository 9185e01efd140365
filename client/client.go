package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// Client publishes requests to detour and collects their results over one
// NATS connection, which stays the caller's to close.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// New returns a Client on nc, reaching JetStream with its default domain and
// API prefix. The error is jetstream.New's.
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// NewWithJetStream returns a Client that stores requests and reads results
// through js (for a JetStream domain or API prefix of its own) and
// subscribes and asks on js.Conn().
func NewWithJetStream(js jetstream.JetStream) *Client {
	return &Client{nc: js.Conn(), js: js}
}

// Receipt is JetStream's acknowledgement of one published request.
type Receipt struct {
	// ID is the request's id: its own, or the NUID assigned to a request
	// that had none.
	ID string
	// Seq is the request's sequence in DETOUR_REQUESTS (for a duplicate,
	// the earlier request's). A result stored under the id that answers
	// another sequence is not this request's (wire.Answers).
	Seq uint64
	// Duplicate is set when JetStream took the id for a request published
	// within its 2-minute duplicate window: nothing was queued, and the
	// result is that request's.
	Duplicate bool
	// Published is when the request was handed to JetStream, by this
	// machine's clock; zero for a request that was not published.
	Published time.Time
}

// ErrNoStream is a publish that no stream took: the chain is not configured,
// or no processor has started and created DETOUR_REQUESTS.
var ErrNoStream = errors.New("no stream takes the subject")

// ErrNoResult is reported for a request whose result did not arrive before
// the wait ended.
var ErrNoResult = errors.New("no result before the timeout")

// ErrNotPublished is reported for a request of PublishAll that was never
// sent because publishing stopped (an error, Options.Stop, or the context
// ended) before its turn.
var ErrNotPublished = errors.New("not published")

// ErrStopped is why requests were not published after Options.Stop closed.
var ErrStopped = errors.New("stopped")

// Publish stores req in DETOUR_REQUESTS on detour.requests.<chainName>, as
// JSON with Nats-Msg-Id set to its id (a NUID when req.ID is empty), and
// returns the acknowledgement. It does not wait for the result: that is
// published to req.ReplyTo when it names one, and stored under
// detour.results.<id>, where Result reads it.
//
// A failed publish (a server restart, a leader election) is retried with
// backoff until ctx ends, under the same Nats-Msg-Id, so an attempt that
// landed although its acknowledgement was lost queues nothing twice. Two
// refusals are final: ErrNoStream (an unknown chain) and wire.ErrFull
// (DETOUR_REQUESTS is full; publish again once processors have answered
// some). The error wraps one of these, wire.ErrBadRequest for an id that
// cannot be a subject token, or ctx's error.
func (c *Client) Publish(ctx context.Context, chainName string, req wire.Request) (Receipt, error) {
	if err := withID(&req); err != nil {
		return Receipt{}, err
	}
	at := time.Now()
	ack, err := c.publishRetrying(ctx, chainName, req, 0, false, nil)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{ID: req.ID, Seq: ack.Sequence, Duplicate: ack.Duplicate, Published: at}, nil
}

// Send publishes req as Publish does and waits, until ctx ends, for its
// result: on a private inbox (on req.ReplyTo instead, when it names one),
// and from DETOUR_RESULTS for a reply that was missed or a duplicate's. A
// failed result is returned with a nil error; the error is Publish's, or
// wraps ErrNoResult and ctx's cause when ctx ended first.
func (c *Client) Send(ctx context.Context, chainName string, req wire.Request) (chain.Result, error) {
	outcomes, err := c.PublishAll(ctx, chainName, []wire.Request{req}, Options{Wait: true})
	o := outcomes[0]
	switch {
	case err != nil:
		return chain.Result{}, err
	case errors.Is(o.Err, ErrNoResult) && ctx.Err() != nil:
		return chain.Result{}, fmt.Errorf("client: request %s: %w: %w", o.ID, ErrNoResult, context.Cause(ctx))
	case o.Err != nil:
		return chain.Result{}, fmt.Errorf("client: request %s: %w", o.ID, o.Err)
	}
	return o.Result, nil
}

// Result waits for the stored result of the request r names: it reads
// detour.results.<r.ID> from DETOUR_RESULTS every half second until the
// result there answers r's sequence, or ctx ends. A result stored for an
// earlier request that used the same id is passed over; a Receipt with Seq
// 0 (an id known from elsewhere) takes whatever result is stored under the
// id. Results are kept for the processors' DETOUR_RESULT_TTL (24 h by
// default). The error wraps ErrNoResult and ctx's cause when ctx ends first,
// jetstream.ErrStreamNotFound when no processor has created DETOUR_RESULTS,
// or the decoding error of a stored result that is not one.
func (c *Client) Result(ctx context.Context, r Receipt) (chain.Result, error) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error // of the last read that failed
	for {
		var res chain.Result
		var found bool
		s, err := c.js.Stream(ctx, wire.ResultsStream)
		if err == nil {
			res, _, found, err = storedResult(ctx, s, r)
		}
		switch {
		case found:
			return res, err
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return chain.Result{}, fmt.Errorf("client: reading the result of %s: %w", r.ID, err)
		case err != nil:
			last = err // the server is unreachable for now: read again
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("client: request %s: %w: %w", r.ID, ErrNoResult, context.Cause(ctx))
			if last != nil {
				err = fmt.Errorf("%w (last read: %v)", err, last)
			}
			return chain.Result{}, err
		case <-tick.C:
		}
	}
}

// storedResult reads the result of r from s, DETOUR_RESULTS, and when the
// server stored it. found is false, with a nil error, when none that
// answers r is stored yet; it is true, with the decoding error, for one that
// answers r but does not decode.
func storedResult(ctx context.Context, s jetstream.Stream, r Receipt) (res chain.Result, at time.Time, found bool, err error) {
	m, err := s.GetLastMsgForSubject(ctx, wire.ResultSubject(r.ID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return res, at, false, nil
	case err != nil:
		return res, at, false, err
	case r.Seq != 0 && !wire.Answers(m.Header, time.Time{}, r.Seq, time.Time{}): // the acknowledgement has no time
		return res, at, false, nil
	}
	if res, err = wire.DecodeResult(m.Data, m.Header); err != nil {
		return res, m.Time, true, fmt.Errorf("client: the result stored for %s does not decode: %w", r.ID, err)
	}
	return res, m.Time, true, nil
}

// withID gives req a NUID when it has no id, and refuses an id that cannot
// be a subject token.
func withID(req *wire.Request) error {
	if req.ID == "" {
		req.ID = nuid.Next()
	} else if err := wire.ValidateID(req.ID); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// requestMsg is r as JSON on subject, with Nats-Msg-Id set to its id.
func requestMsg(subject string, r wire.Request) (*nats.Msg, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("client: encoding request %s: %w", r.ID, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set(wire.HeaderContentType, wire.JSON.ContentType())
	msg.Header.Set(wire.HeaderMsgID, r.ID)
	return msg, nil
}

// publish makes one attempt at storing r.
func (c *Client) publish(ctx context.Context, chainName string, r wire.Request) (*jetstream.PubAck, error) {
	msg, err := requestMsg(wire.RequestSubject(chainName), r)
	if err != nil {
		return nil, err
	}
	ack, err := c.js.PublishMsg(ctx, msg)
	if err != nil {
		if topology.Gone(err) {
			return nil, fmt.Errorf("client: %w %s: is chain %q configured and a processor started?", ErrNoStream, msg.Subject, chainName)
		}
		if full := wire.Full(err); full != nil {
			return nil, fmt.Errorf("client: request %s refused: %w", r.ID, full)
		}
		return nil, fmt.Errorf("client: publishing request %s: %w", r.ID, err)
	}
	return ack, nil
}
