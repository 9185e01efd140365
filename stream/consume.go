package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// Handler settles one delivery; *Processor implements it. It settles the
// message itself instead of returning an error for Consume to NAK: a delivery
// ends in more ways than ack or nak (a NAK with a computed delay, a
// termination after its dead letter is stored, a NAK without delay at
// shutdown), and only the handler knows which.
type Handler interface {
	Handle(ctx context.Context, chainName string, msg jetstream.Msg)
}

// handBacker is a Handler that counts the deliveries handed back at
// shutdown, as *Processor does; Consume counts there those it hands back
// unworked after the stop.
type handBacker interface{ handBack() }

// ConsumerConfig configures the consume loop. Its settings come from
// config.Settings, which owns their defaults; Consume refuses a config whose
// required fields are unset, naming the field. An optional field's comment
// says what its zero value means.
type ConsumerConfig struct {
	// Chains names the chains to consume, each by its durable consumer,
	// which must exist (EnsureTopology). Required: at least one.
	Chains []string
	// Workers is the number of deliveries handled at once, across chains.
	// Required: positive.
	Workers int
	// ShutdownTimeout is how long in-flight deliveries may run after Consume's
	// context ends; the rest are NAK'd without delay. Required: positive
	// (zero would cut short every provider call in flight at a stop, to be
	// paid for again by the next processor).
	ShutdownTimeout time.Duration
	// Logger receives the consume loop's logs; nil discards them.
	Logger *slog.Logger
	// Repair recreates a consumer or stream that a pull finds gone; nil
	// leaves the pulls failing until someone else does.
	Repair *Repairer
	// Health records whether each chain's pulls work, for readiness; nil
	// records nothing.
	Health *Health
}

// check reports every field of cfg that is unset or out of range.
func (cfg ConsumerConfig) check() error {
	var p problems
	chainList(&p, "ConsumerConfig.Chains", cfg.Chains)
	positive(&p, "ConsumerConfig.Workers", cfg.Workers)
	positive(&p, "ConsumerConfig.ShutdownTimeout", cfg.ShutdownTimeout)
	return p.err()
}

const (
	// pullWait bounds a pull that waits for work. It is also how long a stop
	// may wait for a waiting pull to end, and how soon pulling resumes after
	// the consumer's leader changes.
	pullWait = time.Second
	// pullRetry is the pause after a failed pull (no leader, consumer gone),
	// repaired or not, before the next pull tries again.
	pullRetry = 500 * time.Millisecond
)

// Consume pulls every chain's consumer and hands deliveries to h, at most
// Workers at a time. It pulls only as many deliveries as there are free
// workers: a delivery that waited in a client-side buffer would have its
// AckWait run out unseen, be redelivered to another processor, and be paid
// for twice. It blocks until ctx ends, then stops pulling (a delivery that
// arrives after that is NAK'd without delay), lets in-flight deliveries finish
// for up to ShutdownTimeout, cancels the rest (their handlers NAK them), and
// returns when all are settled. It refuses a config with a required field
// unset before touching the server.
func Consume(ctx context.Context, js jetstream.JetStream, h Handler, cfg ConsumerConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	cfg.Logger = logs.OrDiscard(cfg.Logger)
	// Handlers get a context that outlives ctx by the shutdown timeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	p := &puller{ctx: ctx, workCtx: workCtx, h: h, log: cfg.Logger, repair: cfg.Repair, health: cfg.Health,
		slots: make(chan struct{}, cfg.Workers), work: make(chan pulled, cfg.Workers)}
	// Workers live as long as Consume: a goroutine per delivery would grow
	// a fresh stack for every request (a tenth of the CPU a fast chain
	// costs). A slot is reserved before each delivery is pulled, so a send
	// on work never waits.
	var working sync.WaitGroup
	for range cfg.Workers {
		working.Go(p.worker)
	}
	defer func() { close(p.work); working.Wait() }()
	consumers := make([]jetstream.Consumer, len(cfg.Chains))
	for i, name := range cfg.Chains {
		cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(name))
		if topology.Gone(err) && cfg.Repair != nil && cfg.Repair.Ensure(ctx) == nil {
			cons, err = js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(name))
		}
		if err != nil && ctx.Err() != nil {
			// Stopped while starting: nothing was taken, so nothing is
			// handed back, and a stop is not a failure.
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped before the first pull: nothing to settle
			}
			return fmt.Errorf("stream: consumer %s: %w", wire.ConsumerName(name), err)
		}
		consumers[i] = cons
	}
	var pulling sync.WaitGroup
	for i, name := range cfg.Chains {
		pulling.Add(1)
		go func() {
			defer pulling.Done()
			(&chainPuller{puller: p, chain: name, cons: consumers[i], alone: len(cfg.Chains) == 1}).run()
		}()
	}
	pulling.Wait() // returns once ctx has ended and every pull is drained
	settled := make(chan struct{})
	go func() { p.inFlight.Wait(); close(settled) }()
	select {
	case <-settled:
	case <-time.After(cfg.ShutdownTimeout):
		cfg.Logger.Warn("shutdown timeout: handing in-flight requests back")
		cancelWork()
		<-settled
	}
	return nil
}

// puller runs one pull loop per chain over a shared pool of worker slots.
type puller struct {
	ctx, workCtx context.Context
	h            Handler
	log          *slog.Logger
	repair       *Repairer
	health       *Health
	slots        chan struct{} // one token per busy worker
	work         chan pulled   // deliveries handed to the workers
	inFlight     sync.WaitGroup
}

// pulled is a delivery of a chain, handed to a worker.
type pulled struct {
	chain string
	msg   jetstream.Msg
}

// worker handles deliveries until work is closed, freeing its slot after
// each.
func (p *puller) worker() {
	for d := range p.work {
		p.h.Handle(p.workCtx, d.chain, d.msg)
		p.release(1)
		p.inFlight.Done()
	}
}

// chainPuller is the pull loop of one chain.
type chainPuller struct {
	*puller
	chain string
	cons  jetstream.Consumer
	// alone is set when this is the processor's only chain.
	alone bool
	// failing is set from a failed pull to the next one that works, so
	// that an outage is logged once, not at every retry.
	failing bool
}

// run pulls the chain until ctx ends, each pull asking for no more
// deliveries than there are free workers. A pull that waits hands each
// delivery to a worker as it arrives, so the pull need not end before one
// is worked on.
//
// The only chain of a processor makes one pull per batch: it waits on
// every free worker, and takes at once what is already queued, up to that
// many: a pull that takes what is there without waiting, made first,
// would only add a round trip per batch.
//
// One of several chains first takes what is queued for every free worker
// without waiting; when nothing is, it waits on a single worker, so that
// an idle chain never holds up a busy one.
func (c *chainPuller) run() {
	for c.ctx.Err() == nil {
		reserved := c.reserve()
		if reserved == 0 {
			return
		}
		if !c.alone {
			batch, err := c.cons.FetchNoWait(reserved)
			got, err := c.dispatch(c.chain, batch, err, reserved)
			if got > 0 || err != nil {
				c.release(reserved - got)
				c.settle(err)
				continue
			}
			c.release(reserved - 1)
			reserved = 1
		}
		batch, err := c.cons.Fetch(reserved, jetstream.FetchMaxWait(pullWait))
		got, err := c.dispatch(c.chain, batch, err, reserved)
		c.release(reserved - got)
		c.settle(err)
	}
}

// settle records the outcome of one pull. After a failure the chain is not
// ready until a pull works; a consumer or stream found gone is recreated
// (by whichever worker of any chain gets there first); then the loop waits
// pullRetry before the next pull, for a leader election or the repair to
// settle.
func (c *chainPuller) settle(err error) {
	if c.ctx.Err() != nil {
		return // a pull cut short by the stop is no failure
	}
	c.health.pulled(c.chain, err)
	if err == nil {
		if c.failing {
			c.failing = false
			c.log.Info("pulling requests again", "chain", c.chain)
		}
		return
	}
	if !c.failing {
		c.failing = true
		c.log.Warn("pulling requests failed; not ready until a pull works, retrying", "chain", c.chain, "err", err)
	} else {
		c.log.Debug("pulling requests failed again", "chain", c.chain, "err", err)
	}
	if topology.Gone(err) {
		_ = c.repair.Ensure(c.ctx)
	}
	select {
	case <-c.ctx.Done():
	case <-time.After(pullRetry):
	}
}

// reserve takes one free worker slot, waiting for it, and then every other
// slot that is free right now. It returns 0 when ctx ends first.
func (p *puller) reserve() int {
	if !p.reserveOne() {
		return 0
	}
	n := 1
	for n < cap(p.slots) {
		select {
		case p.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func (p *puller) reserveOne() bool {
	// Checked first: a select with both cases ready picks one at random,
	// and a pull started after the stop brings in a delivery only to hand
	// it back.
	if p.ctx.Err() != nil {
		return false
	}
	select {
	case <-p.ctx.Done():
		return false
	case p.slots <- struct{}{}:
		return true
	}
}

func (p *puller) release(n int) {
	for range n {
		<-p.slots
	}
}

// dispatch hands each delivery of batch to a worker, each on a slot
// reserved for it, and returns how many it started and the pull's error, if
// any. Deliveries arriving after the stop are NAK'd at once so another
// processor takes them.
func (p *puller) dispatch(chainName string, batch jetstream.MessageBatch, err error, reserved int) (started int, _ error) {
	if err != nil {
		return 0, err
	}
	for msg := range batch.Messages() {
		if p.ctx.Err() != nil || started == reserved {
			_ = msg.Nak()
			if hb, ok := p.h.(handBacker); ok && p.ctx.Err() != nil {
				hb.handBack()
			}
			continue
		}
		started++
		p.inFlight.Add(1)
		p.work <- pulled{chain: chainName, msg: msg}
	}
	return started, batch.Error()
}
