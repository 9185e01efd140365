package natstest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server, and cuts them off the ways a
// network does: Blackhole, HoldReplies and Refuse, each until Restore. Its
// methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond // signalled when state changes
	state  proxyState
	conns  map[net.Conn]struct{} // both ends of every connection
}

type proxyState int

const (
	proxyForwarding proxyState = iota
	proxyBlackhole
	proxyHoldingReplies
	proxyRefusing
	proxyClosed
)

// StartProxy forwards a loopback port to target (host:port) for the
// duration of the test; cleanup closes it and every connection through it.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	wg.Go(func() { p.accept(&wg) })
	t.Cleanup(func() {
		p.set(proxyClosed)
		ln.Close()
		wg.Wait()
	})
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Blackhole is a partition: every connection stays open and nothing crosses
// it either way until Restore, when what was held back arrives, as TCP's
// retransmissions would deliver it once a partition heals; a client learns
// of it only from its pings.
func (p *Proxy) Blackhole() { p.set(proxyBlackhole) }

// HoldReplies holds back everything the server sends, from now until
// Restore, while what clients send still reaches it: a request the server
// takes, whose reply (a publish's acknowledgement) is lost if Refuse comes
// before Restore.
func (p *Proxy) HoldReplies() { p.set(proxyHoldingReplies) }

// Refuse closes every connection through the proxy, and closes each new one
// at once, until Restore, as a restarting load balancer would; what was held
// back is lost.
func (p *Proxy) Refuse() { p.set(proxyRefusing) }

// Restore forwards again, and delivers what a black hole held back.
func (p *Proxy) Restore() { p.set(proxyForwarding) }

func (p *Proxy) set(s proxyState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == proxyClosed {
		return
	}
	p.state = s
	if s == proxyRefusing || s == proxyClosed {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
	p.cond.Broadcast()
}

// accept runs until the listener closes; each connection's two copies are
// in wg.
func (p *Proxy) accept(wg *sync.WaitGroup) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.state == proxyRefusing || p.state == proxyClosed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			continue
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		wg.Go(func() { p.copy(server, client, false) })
		wg.Go(func() { p.copy(client, server, true) })
	}
}

// copy forwards from src to dst until either closes, holding each read
// while the proxy is a black hole, or holds replies and src is the server
// (fromServer).
func (p *Proxy) copy(dst, src net.Conn, fromServer bool) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(fromServer) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the proxy holds a read (every read in a black hole, the
// server's, fromServer, while it holds replies), and reports whether it
// forwards it.
func (p *Proxy) pass(fromServer bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.state == proxyBlackhole || (p.state == proxyHoldingReplies && fromServer) {
		p.cond.Wait()
	}
	return p.state == proxyForwarding || p.state == proxyHoldingReplies
}
