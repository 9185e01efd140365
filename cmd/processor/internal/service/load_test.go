package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/wire"
)

// readiness samples the Ready of some processors every millisecond until
// stopped: finer than the 10 ms asked for, because a processor whose result
// store failed is unready only until its next store works, a few tens of
// milliseconds under the scenarios' load.
type readiness struct {
	procs    []*service.Processor
	unready  []atomic.Int64 // nanoseconds seen unready, by processor
	stopping chan struct{}
	stopped  chan struct{}
}

func sampleReadiness(procs ...*service.Processor) *readiness {
	r := &readiness{procs: procs, unready: make([]atomic.Int64, len(procs)),
		stopping: make(chan struct{}), stopped: make(chan struct{})}
	go func() { // ends with stop
		defer close(r.stopped)
		last := time.Now()
		for {
			select {
			case <-r.stopping:
				return
			case <-time.After(time.Millisecond):
			}
			now := time.Now()
			for i, p := range r.procs {
				if !p.Ready() {
					r.unready[i].Add(int64(max(now.Sub(last), time.Nanosecond)))
				}
			}
			last = now
		}
	}()
	return r
}

func (r *readiness) stop() {
	close(r.stopping)
	<-r.stopped
}

func (r *readiness) unreadyFor(i int) time.Duration { return time.Duration(r.unready[i].Load()) }

func (r *readiness) anyUnready() bool {
	for i := range r.procs {
		if r.unreadyFor(i) > 0 {
			return true
		}
	}
	return false
}

func (r *readiness) allUnready() bool {
	for i := range r.procs {
		if r.unreadyFor(i) == 0 {
			return false
		}
	}
	return true
}

// loadGen publishes a request every interval until stopped.
type loadGen struct {
	mu      sync.Mutex
	ids     []string
	halt    chan struct{}
	stopped chan struct{}
}

// startLoad publishes requests named prefix-N every interval; with a reply
// prefix, each names reply+id as its reply subject.
func (h *harness) startLoad(prefix string, interval time.Duration, reply string) *loadGen {
	l := &loadGen{halt: make(chan struct{}), stopped: make(chan struct{})}
	go func() { // ends with stop
		defer close(l.stopped)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.halt:
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("%s-%d", prefix, n)
			req := request(id, "hello")
			if reply != "" {
				req.ReplyTo = reply + id
			}
			data, err := json.Marshal(req)
			if err != nil {
				h.t.Error(err)
				return
			}
			if _, err := h.js.Publish(context.Background(), wire.RequestSubject("default"), data); err != nil {
				h.t.Errorf("publishing %s: %v", id, err)
				return
			}
			l.mu.Lock()
			l.ids = append(l.ids, id)
			l.mu.Unlock()
		}
	}()
	h.t.Cleanup(func() { l.stop() })
	return l
}

func (l *loadGen) published() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// stop ends the load and returns the ids published, in order.
func (l *loadGen) stop() []string {
	select {
	case <-l.halt:
	default:
		close(l.halt)
	}
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids
}

// replyCounter counts the messages on each reply subject under replyPrefix.
type replyCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *harness) countReplies() *replyCounter {
	c := &replyCounter{n: map[string]int{}}
	sub, err := h.nc.Subscribe(replyPrefix+">", func(m *nats.Msg) {
		c.mu.Lock()
		c.n[m.Subject]++
		c.mu.Unlock()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

func (c *replyCounter) count(subject string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[subject]
}

func (c *replyCounter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

// storedResults is how many messages DETOUR_RESULTS holds (0 while it is
// gone).
func (h *harness) storedResults() uint64 {
	s, err := h.js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// resultsPerSubject counts DETOUR_RESULTS's messages by subject.
func (h *harness) resultsPerSubject() map[string]uint64 {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.js.Stream(ctx, wire.ResultsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(wire.ResultsPrefix+">"))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Subjects
}
