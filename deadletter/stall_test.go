package deadletter_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/deadletter"
)

// stallingProxy forwards NATS connections to a server and, once it has sent
// after bytes from the server to the client, holds that direction for hold.
type stallingProxy struct {
	ln    net.Listener
	after int
	hold  time.Duration
	mu    sync.Mutex
	sent  int
	held  bool
}

func startStallingProxy(t *testing.T, target string, after int, hold time.Duration) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, after: after, hold: hold}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(server, client); server.Close() })
			wg.Go(func() { p.toClient(client, server); client.Close() })
		}
	})
	return p
}

func (p *stallingProxy) toClient(client, server net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.sent += n
			stall := !p.held && p.sent >= p.after
			p.held = p.held || stall
			p.mu.Unlock()
			if stall {
				time.Sleep(p.hold)
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestAListingNeverEndsShortWhenTheServerPauses: a server that sends nothing
// for a while in the middle of a listing (a leader election, a pause) has
// not removed the rest. dlq list, replay -all and purge -reason read through
// the same listing, so one that ended there without an error would report
// success for part of the dead letters.
func TestAListingNeverEndsShortWhenTheServerPauses(t *testing.T) {
	e := newEnv(t)
	const letters = 600
	for i := range letters {
		e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, SourceSeq: uint64(i + 1),
			Data: []byte(fmt.Sprintf(`{"id":"r%d"}`, i))})
	}
	deadletter.SetIdleTimeout(t, 100*time.Millisecond)
	// The pause starts in the middle of the first batch of dead letters and
	// outlasts the listing's wait for the next (100 ms here), not its
	// question to the stream (5 s).
	proxy := startStallingProxy(t, e.js.Conn().ConnectedAddr(), 60_000, 150*time.Millisecond)
	nc, err := nats.Connect("nats://" + proxy.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := deadletter.NewStore(js).List(context.Background(), deadletter.Filter{})
	proxy.mu.Lock()
	held := proxy.held
	proxy.mu.Unlock()
	if !held {
		t.Fatal("the server never paused: the listing sent less than the proxy waits for")
	}
	// Read to its end or failed, never short with no error; a pause this
	// short, once, is read through.
	if err != nil || len(entries) != letters {
		t.Fatalf("listed %d of %d dead letters, err %v", len(entries), letters, err)
	}
}
