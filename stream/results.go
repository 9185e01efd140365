package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// answer stores and publishes the result, then acks. The answer is paid
// for, so a failed store is retried for as long as the request may live:
// handing it back would pay a provider again. This runs on the stack the
// worker waited on, which must stay within 8 KiB (BENCHMARKS.md): the
// result goes by pointer, and the failure path is in unstored.
func (d *delivery) answer(ctx context.Context, res *chain.Result) {
	attempts, err := d.keep(ctx, res, d.deadline())
	if errors.Is(err, errAnswered) {
		d.answeredElsewhere(res.Status)
		return
	}
	if err != nil {
		d.unstored(ctx, res, attempts, err)
		return
	}
	_ = d.msg.Ack()
	outcome := OutcomeOK
	if res.Degraded {
		outcome = OutcomeDegraded
	}
	d.p.cfg.Observer.Settled(d.chain, outcome)
	now := d.p.cfg.Now()
	d.p.cfg.Observer.Answered(d.chain, now.Sub(d.meta.Timestamp), now, res.Degraded)
}

// answeredElsewhere acks a delivery whose result was not stored, as another
// delivery's answers the request (errAnswered).
func (d *delivery) answeredElsewhere(status chain.Status) {
	d.log().Info("another delivery answered the request meanwhile; its result stands, and this one is neither stored nor replied",
		"status", status, "deliveries", d.meta.NumDelivered)
	_ = d.msg.Ack()
	d.p.cfg.Observer.Settled(d.chain, OutcomeAlreadyAnswered)
}

// unstored settles a delivery whose answer keep could not store.
func (d *delivery) unstored(ctx context.Context, res *chain.Result, attempts int, err error) {
	switch {
	case errors.Is(err, errTooLarge):
		// Retrying cannot help: tell the requester rather than pay the
		// provider again on every redelivery.
		res.Content = ""
		d.fail(ctx, deadletter.ReasonTooLarge, *res, err)
	case ctx.Err() != nil: // shutdown: another processor takes it at once
		d.nak(0, NakShutdown)
	default:
		d.log().Error("publishing result; the request expires before its answer can be stored", "attempts", attempts, "err", err)
		// A failed result names no answer, only what was tried.
		d.fail(ctx, deadletter.ReasonExpired, chain.Result{Attempts: res.Attempts}, fmt.Errorf("the answer could not be stored before the deadline: %w", err))
	}
}

// keep stores and publishes res, retrying a failed store (holding) up to a
// last try at until. It returns how many tries it made and nil once res is
// stored, else the last error: errTooLarge, errAnswered, ctx's end (the
// shutdown deadline) or the try at until. res goes by pointer for the
// worker's stack (answer).
func (d *delivery) keep(ctx context.Context, res *chain.Result, until time.Time) (attempts int, err error) {
	// Not cut short by the shutdown deadline, only by publishTimeout a try:
	// what it stores is paid for, or all a requester will hear.
	storeCtx := context.WithoutCancel(ctx)
	h := d.hold(ctx, until)
	defer h.stop()
	for attempts = 1; ; attempts++ {
		attemptCtx, cancel := context.WithTimeout(storeCtx, publishTimeout)
		err = d.publishResult(attemptCtx, res)
		cancel()
		d.p.resultStored(storeCtx, err)
		if err == nil || errors.Is(err, errTooLarge) || errors.Is(err, errAnswered) || !h.more() {
			return attempts, err
		}
		if sparse(uint64(attempts)) { // a store down for hours logs a few dozen lines
			d.log().Warn("publishing result; retrying", "attempt", attempts, "status", res.Status, "err", err)
		}
		if !h.wait() {
			return attempts, err
		}
	}
}

// A failed store is retried as holding paces it: an answer's until its
// deadline, a failed result's for failedResultPatience. resultMargin bytes
// are kept free below the max payload for the headers that differ between
// the stored copy and the reply.
const (
	resultMargin     = 256
	publishRetryBase = 250 * time.Millisecond
	publishRetryMax  = 30 * time.Second
	publishTimeout   = 5 * time.Second

	failedResultPatience = time.Minute
)

// errTooLarge marks a result that does not fit the server's max payload.
var errTooLarge = errors.New("too large for the server")

// publishResult stores the result under detour.results.<id> and publishes
// it to another reply subject the request named. An ok result over the
// server's max payload is errTooLarge; a failed one loses its metadata and
// attempts to fit, in *res, for the next try too.
func (d *delivery) publishResult(ctx context.Context, res *chain.Result) error {
	out := outgoings.Get().(*outgoing)
	defer out.release()
	data, err := out.enc.Encode(res, d.req.Encoding)
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	stored := out.message(d, wire.ResultSubject(d.req.ID), data, res)
	if limit := d.p.nc.MaxPayload() - resultMargin; limit > 0 && wire.PayloadSize(stored) > limit {
		if res.Status == chain.StatusOK {
			return fmt.Errorf("answer of %d bytes (a %d-byte result) does not fit the server's max payload of %d bytes: %w",
				len(res.Content), wire.PayloadSize(stored), d.p.nc.MaxPayload(), errTooLarge)
		}
		if res.Metadata == nil && res.Attempts == nil {
			return fmt.Errorf("failed result of %d bytes: %w", wire.PayloadSize(stored), errTooLarge)
		}
		res.Metadata, res.Attempts = nil, nil
		res.Error += " (metadata and attempts left out: too large for the server)"
		return d.publishResult(ctx, res)
	}
	if err := d.storeResult(ctx, out, stored); err != nil {
		return err
	}
	if d.req.ReplyTo == "" || d.req.ReplyTo == stored.Subject {
		return nil
	}
	reply := out.message(d, d.req.ReplyTo, data, res)
	if err := d.p.nc.PublishMsg(reply); err != nil {
		return fmt.Errorf("publishing to reply subject: %w", err)
	}
	return nil
}

// errAnswered: another delivery's result answers the request message (one
// cut off past AckWait, or a consumer made again). Nothing is replied.
var errAnswered = errors.New("another delivery's result answers this request message")

// maxStoreRounds bounds how often storeResult finds the subject's last
// message changed under it before it leaves the next try to keep.
const maxStoreRounds = 4

// storeResult stores msg under detour.results.<id>, expecting the
// subject's last message to be lastResult, so that a second writer, however
// late, learns of the first one's result instead of storing after it.
// Refused, it reads the last message: this delivery's own earlier try whose
// ack was lost is success; another delivery's answer is errAnswered; a
// result of another request message with the same id is stored after, under
// a Nats-Msg-Id of this message's own that the duplicate window keeps.
func (d *delivery) storeResult(ctx context.Context, out *outgoing, msg *nats.Msg) error {
	for range maxStoreRounds {
		out.expect(msg, d.lastResult)
		ack, err := d.p.js.PublishMsg(ctx, msg)
		if err == nil && !ack.Duplicate {
			d.lastResult = ack.Sequence
			return nil
		}
		if err != nil && !wrongLastSequence(err) {
			return fmt.Errorf("storing result: %w", err)
		}
		// The subject moved on, or the id is in the duplicate window (a
		// clustered stream checks that first): look at what is there.
		last, err := d.p.results.GetLastMsgForSubject(ctx, msg.Subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			d.lastResult = 0
		case err != nil:
			return fmt.Errorf("storing result: reading the last of %s: %w", msg.Subject, err)
		case d.answers(last) && last.Header.Get(wire.HeaderDelivery) == d.storeID:
			d.lastResult = last.Sequence
			return nil
		case d.answers(last):
			return errAnswered
		default:
			d.lastResult = last.Sequence
		}
		msg.Header.Set(wire.HeaderMsgID, fmt.Sprintf("%s:%d:%d", d.req.ID, d.meta.Sequence.Stream, d.meta.Timestamp.UnixNano()))
	}
	return fmt.Errorf("storing result: %s changed %d times while this one was stored", msg.Subject, maxStoreRounds)
}

// expect makes msg expect seq as its subject's last sequence, without the
// allocations of jetstream.WithExpectLastSequencePerSubject.
func (out *outgoing) expect(msg *nats.Msg, seq uint64) {
	out.vals[len(out.vals)-1] = strconv.FormatUint(seq, 10)
	msg.Header[jetstream.ExpectedLastSubjSeqHeader] = out.vals[len(out.vals)-1:]
}

// wrongLastSequence reports whether err refuses a store that expected
// another last subject sequence; a replicated stream has a code of its own,
// which jetstream.ErrKeyExists misses.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// outgoing is a result on its way out, reused (outgoings): a fast chain
// would otherwise allocate a good part of its garbage here. A publish has
// copied the message by the time it returns, so an outgoing is free again
// once publishResult returns.
type outgoing struct {
	enc  wire.ResultEncoder
	vals [10]string // the headers' values, one slice of one each; the last is expect's
	msg  nats.Msg
}

var outgoings = sync.Pool{New: func() any { return new(outgoing) }}

// maxPooledBuffer is the largest encoding buffer, in bytes, taken back into
// the pool: one a large answer grew is left to the garbage collector.
const maxPooledBuffer = 64 << 10

// release puts out back into the pool, holding nothing of its result.
func (out *outgoing) release() {
	if out.enc.Cap() > maxPooledBuffer {
		return
	}
	out.vals = [len(out.vals)]string{}
	clear(out.msg.Header)
	out.msg = nats.Msg{Header: out.msg.Header}
	outgoings.Put(out)
}

// message is the result message to subject, in out.msg, replacing the
// last one made.
func (out *outgoing) message(d *delivery, subject string, data []byte, res *chain.Result) *nats.Msg {
	if d.storeID == "" {
		d.storeID = nuid.Next()
	}
	out.vals = [...]string{d.req.ID, d.req.ID, res.Model, res.Provider, strconv.FormatBool(res.Degraded),
		string(res.Status), d.req.Encoding.ContentType(), d.storeID, string(res.Cache), ""}
	h := out.msg.Header
	if h == nil {
		h = make(nats.Header, len(out.vals)+2) // and the two that MarkAnswers sets
	}
	clear(h) // a reply subject's message follows the stored one
	// Capacity ends with each value, so an Add cannot write over the next.
	one := func(i int) []string { return out.vals[i : i+1 : i+1] }
	h[wire.HeaderMsgID] = one(0)
	h[wire.HeaderRequestID] = one(1)
	h[wire.HeaderModel] = one(2)
	h[wire.HeaderProvider] = one(3)
	h[wire.HeaderDegraded] = one(4)
	h[wire.HeaderStatus] = one(5)
	h[wire.HeaderContentType] = one(6)
	h[wire.HeaderDelivery] = one(7)
	if res.Cache != "" {
		h[wire.HeaderCache] = one(8)
	}
	wire.MarkAnswers(h, d.meta.Sequence.Stream, d.meta.Timestamp)
	out.msg = nats.Msg{Subject: subject, Data: data, Header: h}
	return &out.msg
}

// resultStored records one attempt to store a result for readiness, and
// repairs a results stream found gone before the next. errTooLarge is the
// result's fault, not counted; errAnswered is a store that worked.
func (p *Processor) resultStored(ctx context.Context, err error) {
	switch {
	case errors.Is(err, errTooLarge):
		return
	case errors.Is(err, errAnswered):
		err = nil
	}
	switch changed := p.cfg.Health.stored(err); {
	case changed && err != nil:
		p.cfg.Logger.Warn("storing results fails; not ready until one is stored", "err", err)
	case changed:
		p.cfg.Logger.Info("results are stored again")
	}
	if err != nil && topology.Gone(err) {
		_ = p.cfg.Repair.Ensure(ctx)
	}
}
