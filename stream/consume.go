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
// message itself rather than return an error to NAK: a delivery ends in
// more ways than ack or nak (a NAK with a delay, a term after its dead
// letter), and only the handler knows which.
type Handler interface {
	Handle(ctx context.Context, chainName string, msg jetstream.Msg)
}

// handBacker is a Handler that counts the deliveries handed back at
// shutdown (*Processor); Consume adds those it hands back unworked.
type handBacker interface{ handBack() }

// ConsumerConfig configures the consume loop, with config.Settings'
// defaults. Consume refuses a required field unset, naming it.
type ConsumerConfig struct {
	// Chains names the chains to consume, each by its durable consumer
	// (topology.Ensure). Required: at least one.
	Chains []string
	// Workers is the number of deliveries handled at once, across chains.
	// Required: positive.
	Workers int
	// ShutdownTimeout is how long in-flight deliveries may run after the
	// stop; the rest are NAK'd without delay. Required: positive (zero
	// would cut short every provider call in flight, to be paid again).
	ShutdownTimeout time.Duration
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
	// Repair recreates a consumer or stream a pull finds gone; nil repairs
	// nothing.
	Repair *topology.Repairer
	// Health records whether each chain's pulls work; nil records nothing.
	Health *Health
}

func (cfg ConsumerConfig) check() error {
	var p problems
	if len(cfg.Chains) == 0 {
		p.add("ConsumerConfig.Chains", "must name at least one chain")
	}
	for i, c := range cfg.Chains {
		if c == "" {
			p.add(fmt.Sprintf("ConsumerConfig.Chains[%d]", i), "must not be empty")
		}
	}
	positive(&p, "ConsumerConfig.Workers", cfg.Workers)
	positive(&p, "ConsumerConfig.ShutdownTimeout", cfg.ShutdownTimeout)
	return p.err()
}

const (
	// pullWait bounds a pull that waits for work: also how long a stop may
	// wait for it, and how soon pulling resumes after a leader change.
	pullWait = time.Second
	// pullRetry is the pause after a failed pull.
	pullRetry = 500 * time.Millisecond
)

// Consume pulls every chain's consumer and hands deliveries to h, pulling
// only as many as there are free workers: one left waiting in a client
// buffer would have its AckWait run out unseen and be paid for twice. It
// blocks until ctx ends, then stops pulling (a delivery that arrives later
// is NAK'd at once), lets in-flight deliveries finish for up to
// ShutdownTimeout, cancels the rest (their handlers NAK them), and returns
// when all are settled. It refuses a bad config before touching the server.
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
	// Workers live as long as Consume: a goroutine per delivery would grow a
	// fresh stack each time (a tenth of a fast chain's CPU). A slot is
	// reserved before each pull, so a send on work never waits.
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
			return nil // stopped while starting: nothing was taken
		}
		if err != nil {
			return fmt.Errorf("stream: consumer %s: %w", wire.ConsumerName(name), err)
		}
		consumers[i] = cons
	}
	var pulling sync.WaitGroup
	for i, name := range cfg.Chains {
		pulling.Go((&chainPuller{puller: p, chain: name, cons: consumers[i], alone: len(cfg.Chains) == 1}).run)
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
	repair       *topology.Repairer
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
	alone bool // the processor's only chain
	// failing is set from a failed pull to the next that works, so that an
	// outage is logged once.
	failing bool
}

// run pulls the chain until ctx ends, each delivery handed to a worker as
// it arrives. The only chain makes one pull per batch, waiting on every
// free worker: a pull without waiting first would only add a round trip.
// One of several chains takes what is queued without waiting; when nothing
// is, it waits on a single worker, so that an idle chain never holds up a
// busy one.
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
// ready until a pull works, what is gone is recreated, and the next pull
// waits pullRetry, for a leader election or the repair to settle.
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

// reserve waits for one free worker slot, then takes every other free now.
// It returns 0 when ctx ends first.
func (p *puller) reserve() int {
	// Checked first: a select with both cases ready picks one at random.
	if p.ctx.Err() != nil {
		return 0
	}
	select {
	case <-p.ctx.Done():
		return 0
	case p.slots <- struct{}{}:
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

func (p *puller) release(n int) {
	for range n {
		<-p.slots
	}
}

// dispatch hands each delivery of batch to a worker on a reserved slot and
// returns how many it started; one past them or the stop is NAK'd at once.
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
