package stream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// pullHeartbeat is how often the server must show life on a pull; missing
// two makes the client pull again.
const pullHeartbeat = 2 * time.Second

// Handler settles one delivery; *Processor implements it.
type Handler interface {
	Handle(ctx context.Context, chainName string, msg jetstream.Msg)
}

// ConsumerConfig configures the consume loop.
type ConsumerConfig struct {
	Chains []string
	// Workers is the number of deliveries handled at once, across chains.
	Workers int
	// ShutdownTimeout is how long in-flight deliveries may run after Run's
	// context ends; the rest are NAK'd without delay.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// Consume pulls every chain's consumer and hands deliveries to h on a pool of
// Workers goroutines. It blocks until ctx ends, then stops pulling, NAKs what
// was buffered, lets in-flight deliveries finish for up to ShutdownTimeout and
// cancels the rest (their handlers NAK them), and returns when all are settled.
func Consume(ctx context.Context, js jetstream.JetStream, h Handler, cfg ConsumerConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	workers := max(cfg.Workers, 1)
	// Handlers get a context that outlives ctx by the shutdown timeout.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	slots := make(chan struct{}, workers)
	var inFlight sync.WaitGroup
	var running []jetstream.ConsumeContext
	defer func() {
		for _, cc := range running {
			cc.Stop()
		}
	}()
	for _, name := range cfg.Chains {
		cons, err := js.Consumer(ctx, RequestsStream, ConsumerName(name))
		if err != nil {
			return fmt.Errorf("stream: consumer %s: %w", ConsumerName(name), err)
		}
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			// Checked first: select picks at random among ready cases, so a
			// free slot would otherwise start new work after the stop.
			if ctx.Err() != nil {
				_ = msg.Nak()
				return
			}
			select {
			case <-ctx.Done():
				_ = msg.Nak() // stopping: another processor takes it at once
				return
			case slots <- struct{}{}:
			}
			inFlight.Add(1)
			go func() {
				defer inFlight.Done()
				defer func() { <-slots }()
				h.Handle(workCtx, name, msg)
			}()
		},
			// Buffered messages' AckWait already runs, so buffer about as
			// many as can be worked on.
			jetstream.PullMaxMessages(workers),
			// The default 30 s pull expiry means a 15 s heartbeat: after the
			// consumer's leader dies the loop would sit idle that long before
			// pulling again. A short heartbeat resumes soon after the election.
			jetstream.PullHeartbeat(pullHeartbeat),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				cfg.Logger.Debug("consume", "chain", name, "err", err)
			}),
		)
		if err != nil {
			return fmt.Errorf("stream: consuming %s: %w", ConsumerName(name), err)
		}
		running = append(running, cc)
	}
	<-ctx.Done()
	for _, cc := range running {
		cc.Drain() // buffered deliveries still reach the callback, which NAKs them
	}
	for _, cc := range running {
		<-cc.Closed()
	}
	running = nil
	settled := make(chan struct{})
	go func() { inFlight.Wait(); close(settled) }()
	select {
	case <-settled:
	case <-time.After(cfg.ShutdownTimeout):
		cfg.Logger.Warn("shutdown timeout: handing in-flight requests back")
		cancelWork()
		<-settled
	}
	return nil
}
