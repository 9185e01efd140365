package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// harness is one embedded server plus the processors a scenario starts on it.
type harness struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	return &harness{t: t, srv: srv, nc: nc, js: js}
}

// testSettings are the defaults of docs/settings.md with fewer workers.
func testSettings() config.Settings {
	return config.Settings{
		Workers: 8, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 1000,
		RequestTTL: time.Hour, ResultTTL: time.Hour, ReplyPrefixes: []string{"detour.results.", "_INBOX."},
		MaxPayload: 1 << 20, ShutdownTimeout: 5 * time.Second, MaxInvalidDeliveries: 3,
	}
}

// parseChainFile parses a chain file through the real parser.
func parseChainFile(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("chain file: %v\n%s", err, yaml)
	}
	return f
}

// startProcessor assembles a processor with its own connection and runs it
// until the test ends.
func (h *harness) startProcessor(file *config.File, settings config.Settings) *service.Processor {
	h.t.Helper()
	p := h.assemble(file, settings, false)
	p.run()
	return p.Processor
}

// testProcessor is an assembled processor whose Run starts with run and ends
// with stop (or at the end of the test).
type testProcessor struct {
	*service.Processor
	run  func()
	stop func()
}

// buildProcessor assembles a processor that does not consume until run, but
// whose mirror follows the bucket from now on, as it does while the
// processor runs: a scenario can see a processor that takes no work yet
// learn of other processors' cooldowns. run hands the mirror over to Run.
func (h *harness) buildProcessor(file *config.File, settings config.Settings) *testProcessor {
	h.t.Helper()
	return h.assemble(file, settings, true)
}

// assemble makes a processor with its own connection, one context for New
// and Run, and, if following, its mirror following the bucket until run.
func (h *harness) assemble(file *config.File, settings config.Settings, following bool, with ...func(*service.Options)) *testProcessor {
	h.t.Helper()
	nc, err := nats.Connect(h.srv.ClientURL())
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	opts := service.Options{Settings: settings, File: file, Conn: nc, Logger: logger}
	for _, w := range with {
		w(&opts)
	}
	p, err := service.New(ctx, opts)
	if err != nil {
		cancel()
		nc.Close()
		h.t.Fatal(err)
	}
	// handOver stops the mirror following on its own, if it does, and
	// returns once it has: Run follows the bucket itself, and a store
	// follows it once at a time.
	handOver := func() {}
	if following {
		followCtx, stopFollowing := context.WithCancel(ctx)
		followed := make(chan struct{})
		go func() { // ends with followCtx, at the latest when the test ends
			defer close(followed)
			_ = p.StoreForTest().Run(followCtx)
		}()
		handOver = func() { stopFollowing(); <-followed }
	}
	var wg sync.WaitGroup
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			handOver()
			wg.Wait()
			nc.Close()
		})
	}
	run := func() {
		handOver()
		wg.Go(func() {
			if err := p.Run(ctx); err != nil {
				h.t.Errorf("processor: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return &testProcessor{Processor: p, run: run, stop: stop}
}

// publish sends a JSON request to a chain and returns its id.
func (h *harness) publish(chainName string, req wire.Request) string {
	h.t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.publishRaw(chainName, data, nil)
	return req.ID
}

func (h *harness) publishRaw(chainName string, data []byte, header nats.Header) *jetstream.PubAck {
	h.t.Helper()
	msg := nats.NewMsg(wire.RequestSubject(chainName))
	msg.Data = data
	for k, v := range header {
		msg.Header[k] = v
	}
	ack, err := h.js.PublishMsg(context.Background(), msg)
	if err != nil {
		h.t.Fatalf("publish: %v", err)
	}
	return ack
}

// request builds a one-message request.
func request(id, prompt string) wire.Request {
	return wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: prompt}}}
}

// waitResult waits for the stored result of id.
func (h *harness) waitResult(id string, timeout time.Duration) (chain.Result, nats.Header) {
	h.t.Helper()
	res, header, err := h.result(id, timeout)
	if err != nil {
		h.t.Fatalf("result %s: %v", id, err)
	}
	return res, header
}

func (h *harness) result(id string, timeout time.Duration) (chain.Result, nats.Header, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := h.js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		return chain.Result{}, nil, err
	}
	for {
		m, err := s.GetLastMsgForSubject(ctx, wire.ResultSubject(id))
		if err == nil {
			res, err := wire.DecodeResult(m.Data, m.Header)
			return res, m.Header, err
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return chain.Result{}, nil, err
		}
		select {
		case <-ctx.Done():
			return chain.Result{}, nil, fmt.Errorf("no result within %s", timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deadLetters returns every dead letter currently stored.
func (h *harness) deadLetters() []*jetstream.RawStreamMsg {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.js.Stream(ctx, wire.DeadLetterStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mirroredCooldown is provider's cooldown key as store's mirror holds it,
// as `processor status` reads it; false once the key has left the mirror.
func mirroredCooldown(store *kvstate.Store, provider string) (kvstate.Cooldown, bool) {
	for _, row := range store.Status(time.Now(), provider) {
		if row.Provider == provider && row.Cooldown != nil {
			return *row.Cooldown, true
		}
	}
	return kvstate.Cooldown{}, false
}
