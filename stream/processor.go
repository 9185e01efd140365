package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// Retry delays after real failures, by delivery count (backoff), and the
// jitter that spreads the requests waiting for the same reopen.
const (
	retryDelayBase = time.Second
	retryDelayMax  = time.Minute
	reopenJitter   = 250 * time.Millisecond
)

// Runner runs one request through a chain; *chain.Chain implements it. req
// is the caller's: Run must neither modify nor keep anything of it. It is a
// pointer so that the worker's stack, held while a provider is waited on,
// holds no copy.
type Runner interface {
	Run(ctx context.Context, req *chain.Request) (chain.Result, error)
}

// ProcessorConfig holds what a Processor needs besides its connections,
// with config.Settings' defaults. NewProcessor refuses a required field
// unset, naming it; an optional field says what its zero value means.
type ProcessorConfig struct {
	// Chains maps a chain name to its runner; a delivery of another chain
	// is dead-lettered bad_request. Required: at least one, none nil.
	Chains map[string]Runner
	// ReplyPrefixes are the prefixes a reply_to may start with
	// (DETOUR_REPLY_PREFIXES) besides the request's own result subject;
	// another is dead-lettered bad_reply_subject. An empty one is refused:
	// it would allow any subject.
	ReplyPrefixes []string
	// MaxPayload is the largest request body, in bytes; a larger one is
	// dead-lettered too_large. Required: positive.
	MaxPayload int
	// RequestTTL is the deadline of a request that sets none, from its
	// publication, and the latest of any. Required: positive.
	RequestTTL time.Duration
	// AckWait is the consumers' (Topology.AckWait): a delivery being worked
	// on beats every AckWait/3. Required: positive.
	AckWait time.Duration
	// MaxInvalidDeliveries is how many deliveries a request gets whose
	// answers are all invalid before it is dead-lettered invalid_output.
	// Zero means 1.
	MaxInvalidDeliveries uint64
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observer is told each delivery's outcome; nil tells nobody.
	Observer Observer
	// Repair recreates a results or dead-letter stream found gone; nil
	// repairs nothing.
	Repair *topology.Repairer
	// Health records whether results can be stored; nil records nothing.
	Health *Health
}

func (cfg ProcessorConfig) check() error {
	var p problems
	if len(cfg.Chains) == 0 {
		p.add("ProcessorConfig.Chains", "must name at least one chain")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Chains)) {
		if cfg.Chains[name] == nil {
			p.add(fmt.Sprintf("ProcessorConfig.Chains[%q]", name), "must not be nil")
		}
	}
	for i, prefix := range cfg.ReplyPrefixes {
		if prefix == "" {
			p.add(fmt.Sprintf("ProcessorConfig.ReplyPrefixes[%d]", i), "must not be empty")
		}
	}
	positive(&p, "ProcessorConfig.MaxPayload", cfg.MaxPayload)
	positive(&p, "ProcessorConfig.RequestTTL", cfg.RequestTTL)
	positive(&p, "ProcessorConfig.AckWait", cfg.AckWait)
	return p.err()
}

// Processor takes deliveries through their life.
type Processor struct {
	cfg        ProcessorConfig
	nc         *nats.Conn
	js         jetstream.JetStream
	dlq        *deadletter.Publisher
	results    jetstream.Stream
	schemas    *chain.SchemaCache
	handedBack atomic.Int64
	seqs       *sequences
}

// HandedBack is how many deliveries a shutdown handed back for another
// processor to take: cut short, or (with Consume) come in after the stop.
func (p *Processor) HandedBack() int64 { return p.handedBack.Load() }

func (p *Processor) handBack() { p.handedBack.Add(1) }

// NewProcessor returns a Processor; the topology must already exist. It
// refuses a bad config before touching the server.
func NewProcessor(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg ProcessorConfig) (*Processor, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.MaxInvalidDeliveries = max(cfg.MaxInvalidDeliveries, 1)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = nobody{}
	}
	cfg.Logger = logs.OrDiscard(cfg.Logger)
	results, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		return nil, fmt.Errorf("stream: opening %s: %w", wire.ResultsStream, err)
	}
	return &Processor{cfg: cfg, nc: nc, js: js, dlq: deadletter.NewPublisher(js), results: results, seqs: newSequences(),
		schemas: chain.NewSchemaCache(chain.SchemaCacheSize)}, nil
}

// Handle processes one delivery of chainName and settles it: ack, NAK (with
// or without delay) or term after a dead letter. It never panics on input.
func (p *Processor) Handle(ctx context.Context, chainName string, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		p.cfg.Logger.Error("delivery without JetStream metadata", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	d := delivery{p: p, chain: chainName, msg: msg, meta: meta, started: p.cfg.Now()}
	ok, settled := p.seqs.begin(meta.Sequence.Stream)
	if !ok {
		p.cfg.Logger.Info("a request being worked on here was delivered again; handing it back", "chain", chainName,
			"seq", meta.Sequence.Stream, "deliveries", meta.NumDelivered)
		d.nak(d.backoff(), NakError)
		return
	}
	defer p.seqs.end(meta.Sequence.Stream)
	d.settledHere = settled
	p.cfg.Observer.InFlight(1)
	defer p.cfg.Observer.InFlight(-1)
	// Siblings, not one function: what admitting needs is off the stack
	// while a provider is waited on.
	if runner := d.admit(ctx); runner != nil {
		d.run(ctx, runner)
	}
}

// delivery is one message being processed.
type delivery struct {
	p       *Processor
	chain   string
	msg     jetstream.Msg
	meta    *jetstream.MsgMetadata
	started time.Time
	req     wire.Decoded
	// settledHere: a worker here settled this request lately, so even a
	// first delivery is checked for an answer.
	settledHere bool
	// lastResult is the sequence of the last message under
	// detour.results.<id> this delivery knows of; 0 (none) until it reads
	// one, and storeResult finds out otherwise.
	lastResult uint64
	// storeID names this delivery on its result (wire.HeaderDelivery).
	storeID string
}

func (d *delivery) log() *slog.Logger {
	return d.p.cfg.Logger.With("chain", d.chain, "seq", d.meta.Sequence.Stream, "id", d.req.ID)
}

// admit decodes the delivery and returns the runner of its chain, or nil
// once it has settled the delivery: refused, dead-lettered, already
// answered, expired, or handed back to be looked at again.
func (d *delivery) admit(ctx context.Context) Runner {
	data := d.msg.Data()
	if len(data) > d.p.cfg.MaxPayload {
		d.refuse(ctx, deadletter.ReasonTooLarge, fmt.Errorf("payload of %d bytes exceeds DETOUR_MAX_PAYLOAD %d", len(data), d.p.cfg.MaxPayload))
		return nil
	}
	req, err := wire.DecodeRequest(data, d.msg.Headers(), d.meta.Sequence.Stream, d.p.cfg.ReplyPrefixes)
	if err != nil {
		reason := deadletter.ReasonBadRequest
		if errors.Is(err, wire.ErrBadReplySubject) {
			reason = deadletter.ReasonBadReplySubject
		}
		d.refuse(ctx, reason, err)
		return nil
	}
	d.req = req
	runner, ok := d.p.cfg.Chains[d.chain]
	if !ok {
		d.fail(ctx, deadletter.ReasonBadRequest, chain.Result{}, fmt.Errorf("no chain named %q is configured", d.chain))
		return nil
	}
	// Checked before the deadline: a request answered just in time whose ack
	// was lost must not be expired after the fact.
	if d.meta.NumDelivered > 1 || d.settledHere {
		answered, err := d.answered(ctx)
		if err != nil {
			// Not knowing is not "no": calling a provider again could pay
			// twice. A redelivery may be the first to find the results
			// stream gone: repair it as a failed store would.
			d.log().Warn("checking for an earlier result; will retry", "err", err)
			d.p.resultStored(ctx, err)
			d.nak(retryDelayBase, NakError)
			return nil
		}
		if answered {
			_ = d.msg.Ack()
			d.p.cfg.Observer.Settled(d.chain, OutcomeAlreadyAnswered)
			return nil
		}
	}
	if !d.started.Before(d.deadline()) {
		d.expire(ctx, nil)
		return nil
	}
	return runner
}

// run runs the request under its deadline and the heartbeat, and settles.
func (d *delivery) run(ctx context.Context, runner Runner) {
	// The deadline is the server's time, the timer the local clock's.
	runCtx, cancelRun := context.WithTimeout(ctx, d.deadline().Sub(d.p.cfg.Now()))
	defer cancelRun()
	// A schema's compilation runs under the heartbeat and the deadline too.
	stopBeat := d.heartbeat(runCtx)
	chainReq, err := d.req.ChainRequest(runCtx, d.p.schemas)
	if err != nil {
		stopBeat()
		d.unrunnable(ctx, runCtx, err)
		return
	}
	res, err := runner.Run(runCtx, &chainReq)
	stopBeat()
	d.settle(ctx, &res, err)
}

func (d *delivery) unrunnable(ctx, runCtx context.Context, err error) {
	switch {
	case ctx.Err() != nil:
		d.nak(0, NakShutdown)
	case runCtx.Err() != nil:
		d.expire(ctx, nil)
	default: // a schema that does not compile
		d.fail(ctx, deadletter.ReasonBadRequest, chain.Result{}, err)
	}
}

func (d *delivery) settle(ctx context.Context, res *chain.Result, err error) {
	d.annotate(res)
	d.p.cfg.Observer.Attempts(res.Attempts)
	d.p.cfg.Observer.Usage(*res)
	var exhausted *chain.ExhaustedError
	switch {
	case err == nil:
		d.answer(ctx, res)
	case errors.As(err, &exhausted) && exhausted.Poison:
		d.fail(ctx, deadletter.ReasonPoison, *res, err)
	case errors.As(err, &exhausted) && exhausted.InvalidOutput && d.meta.NumDelivered >= d.p.cfg.MaxInvalidDeliveries:
		// No outage is to blame: waiting for the deadline would pay every
		// provider once a minute for a day.
		d.fail(ctx, deadletter.ReasonInvalidOutput, *res, err)
	case errors.As(err, &exhausted):
		d.retryLater(exhausted)
	case ctx.Err() != nil: // shutdown: another processor takes it at once
		d.nak(0, NakShutdown)
	default: // the request's own deadline ended the run
		d.expire(ctx, res.Attempts)
	}
}

// deadline is when the request expires: its own deadline, or its publish
// time plus the TTL, whichever comes first.
func (d *delivery) deadline() time.Time {
	last := d.meta.Timestamp.Add(d.p.cfg.RequestTTL)
	if at := d.req.DeadlineAt; d.req.HasDeadline() && at.Before(last) {
		return at
	}
	return last
}

// answered reports whether a result for this request message is already
// stored, and remembers the subject's last message for storeResult.
func (d *delivery) answered(ctx context.Context) (bool, error) {
	m, err := d.p.results.GetLastMsgForSubject(ctx, wire.ResultSubject(d.req.ID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		d.lastResult = 0
		return false, nil
	case err != nil:
		return false, err
	}
	d.lastResult = m.Sequence
	// A result of another request message with the same id (a replayed dead
	// letter, a reused id, a recreated requests stream) does not answer this.
	return d.answers(m), nil
}

func (d *delivery) answers(m *jetstream.RawStreamMsg) bool {
	return wire.Answers(m.Header, m.Time, d.meta.Sequence.Stream, d.meta.Timestamp)
}

func (d *delivery) annotate(res *chain.Result) {
	res.ID = d.req.ID
	res.QueuedMs = max(d.started.Sub(d.meta.Timestamp).Milliseconds(), 0)
	res.Deliveries = d.meta.NumDelivered
	res.Metadata = d.req.Metadata
}

// retryLater NAKs with retryDelay's delay, counting why.
func (d *delivery) retryLater(ex *chain.ExhaustedError) {
	delay := retryDelay(ex, d.backoff(), time.Duration(rand.Int64N(int64(reopenJitter))), d.p.cfg.Now(), d.deadline())
	d.log().Info("no provider answered; retrying later", "delay", delay, "all_cooling", ex.AllCooling, "undecided", ex.Undecided, "deliveries", d.meta.NumDelivered)
	reason := NakFailures
	switch {
	case ex.AllCooling:
		reason = NakAllCooling
	case ex.Undecided:
		reason = NakUndecided
	}
	d.nak(delay, reason)
}

// retryDelay is the delay at now for ex: the earliest reopen plus jitter
// when no provider failed for an outage (all cooling, or undecided), else
// backoff, never before the earliest reopen; at least 10 ms, and never past
// deadline, so that the next delivery expires the request on time.
func retryDelay(ex *chain.ExhaustedError, backoff, jitter time.Duration, now, deadline time.Time) time.Duration {
	var delay time.Duration
	if !ex.AllCooling && !ex.Undecided {
		delay = backoff
	}
	if !ex.ReopenAt.IsZero() {
		delay = max(delay, ex.ReopenAt.Sub(now)+jitter)
	}
	delay = max(delay, 10*time.Millisecond)
	if left := deadline.Sub(now); delay > left {
		delay = max(left, 0)
	}
	return delay
}

// sparse reports whether the nth time something fails, counting from 1,
// is one to log: the 1st, 2nd, 4th, 8th…
func sparse(n uint64) bool { return n&(n-1) == 0 }

func (d *delivery) backoff() time.Duration {
	n := min(max(d.meta.NumDelivered, 1)-1, 16)
	return min(retryDelayBase<<n, retryDelayMax)
}

// nak hands the delivery back, after delay (none when zero), and counts why.
func (d *delivery) nak(delay time.Duration, reason NakReason) {
	if delay > 0 {
		_ = d.msg.NakWithDelay(delay)
	} else {
		_ = d.msg.Nak()
	}
	d.p.cfg.Observer.Nak(d.chain, reason)
	d.p.cfg.Observer.Settled(d.chain, OutcomeRetry)
	if reason == NakShutdown {
		d.p.handBack()
	}
}

// expire dead-letters a request whose deadline passed, with a failed result.
func (d *delivery) expire(ctx context.Context, attempts []chain.Attempt) {
	why := "deadline passed before any provider answered"
	if d.req.HasDeadline() && d.deadline().Before(d.req.DeadlineAt) {
		why = fmt.Sprintf("no provider answered within DETOUR_REQUEST_TTL (%s), the longest a request may wait; its own deadline was later",
			d.p.cfg.RequestTTL)
	}
	d.fail(ctx, deadletter.ReasonExpired, chain.Result{Attempts: attempts}, errors.New(why))
}

// fail dead-letters the request, then publishes a failed result saying why
// when the request has an id (docs/failures.md#dead-letters), and
// terminates it; a dead letter not stored NAKs instead. The dead letter
// comes first: a redelivery would take a stored failed result for the
// answer, and a dead letter not yet stored would be lost. A failed result
// is retried for failedResultPatience only: a burst of refused requests in
// a results outage must not hold every worker.
func (d *delivery) fail(ctx context.Context, reason deadletter.Reason, res chain.Result, cause error) {
	d.annotate(&res)
	res.Status = chain.StatusFailed
	res.Error = failedResultError(reason, cause)
	var keepUntil time.Time // none: hand back at once, to be refused again for free
	if called(res.Attempts) {
		keepUntil = d.deadline() // a redelivery would pay a provider again
	}
	if !d.storeDeadLetter(ctx, reason, cause, res.Attempts, keepUntil) {
		return
	}
	if d.req.ID != "" { // else nowhere to answer: the dead letter is all
		switch attempts, err := d.keep(ctx, &res, d.p.cfg.Now().Add(failedResultPatience)); {
		case errors.Is(err, errAnswered): // the dead letter stays, safe
			d.log().Info("another delivery answered the request meanwhile; its result stands, not this failed one", "reason", reason)
		case err != nil:
			d.log().Error("publishing failed result; giving up", "attempts", attempts, "err", err)
		}
	}
	_ = d.msg.Term()
}

func called(attempts []chain.Attempt) bool {
	return slices.ContainsFunc(attempts, func(a chain.Attempt) bool { return a.Outcome != chain.OutcomeSkipped })
}

// maxResultError bounds the error of a failed result, in bytes.
const maxResultError = 1024

// failedResultError is "<reason>: <why>" on one line, cut to
// maxResultError; a wire error's own prefix would say the reason twice.
func failedResultError(reason deadletter.Reason, cause error) string {
	msg := cause.Error()
	for _, sentinel := range []error{wire.ErrBadRequest, wire.ErrBadReplySubject} {
		if errors.Is(cause, sentinel) {
			msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
		}
	}
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	return text.Cut(string(reason)+": "+msg, maxResultError)
}

// refuse dead-letters a request refused on arrival, with a failed result
// where its id and a reply subject it may name can still be read
// (wire.RefusedAddress).
func (d *delivery) refuse(ctx context.Context, reason deadletter.Reason, cause error) {
	d.req = wire.Decoded{}
	if addr, ok := wire.RefusedAddress(d.msg.Data(), d.msg.Headers(), d.meta.Sequence.Stream, d.p.cfg.ReplyPrefixes); ok {
		d.req = wire.Decoded{Request: wire.Request{ID: addr.ID, ReplyTo: addr.ReplyTo}, Encoding: addr.Encoding}
	}
	d.fail(ctx, reason, chain.Result{}, cause)
}

// storeDeadLetter publishes the dead letter and reports whether it is
// stored. A failed publish is retried (holding) until keepUntil (zero: no
// retry); then, or at a shutdown, the request is handed back.
func (d *delivery) storeDeadLetter(ctx context.Context, reason deadletter.Reason, cause error, attempts []chain.Attempt, keepUntil time.Time) bool {
	letter := deadletter.Letter{
		Chain: d.chain, Reason: reason, Err: cause,
		SourceSeq: d.meta.Sequence.Stream, Deliveries: d.meta.NumDelivered,
		Attempts: attempts, Data: d.msg.Data(), Header: d.msg.Headers(),
	}
	h := d.hold(ctx, keepUntil)
	defer h.stop()
	for try := uint64(1); ; try++ {
		err := d.p.dlq.Publish(ctx, letter)
		if err == nil {
			d.log().Warn("dead-lettered", "reason", reason, "err", cause)
			d.p.cfg.Observer.DeadLetter(d.chain, reason)
			d.p.cfg.Observer.Settled(d.chain, DeadLettered(reason))
			return true
		}
		if n := d.meta.NumDelivered; sparse(n) && sparse(try) { // an outage logs a few lines per request
			d.log().Error("dead-lettering failed; will retry", "reason", reason, "deliveries", n, "try", try, "err", err)
		}
		if topology.Gone(err) {
			_ = d.p.cfg.Repair.Ensure(context.WithoutCancel(ctx))
		}
		if wire.Full(err) != nil {
			// A full stream or store: no wait here makes room, and a flood
			// of poison requests held would take every worker. Handed back
			// with the backoff, it costs its providers once a minute.
			break
		}
		if !h.more() || !h.wait() {
			break
		}
	}
	if ctx.Err() != nil {
		d.nak(0, NakShutdown)
	} else {
		d.nak(d.backoff(), NakError)
	}
	return false
}
