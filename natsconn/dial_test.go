package natsconn

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
)

// TestDialInProcess: a Conn on an in-process server carries messages;
// Close drains it, stops the server and says nothing on Lost.
func TestDialInProcess(t *testing.T) {
	srv := natstest.Start(t)
	conn, err := DialInProcess(srv, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	nc := conn.NATS()
	sub, err := nc.SubscribeSync("hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("hello", []byte("world")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "world" {
		t.Fatalf("NextMsg = %v, %v; want world", msg, err)
	}
	conn.Close()
	if !nc.IsClosed() {
		t.Error("the connection is open after Close")
	}
	if srv.Running() {
		t.Error("the server runs after Close")
	}
	select {
	case err := <-conn.Lost():
		t.Errorf("Lost() = %v after Close", err)
	default:
	}
}

// TestDialByURL: Dial connects to DETOUR_NATS_URL and refuses an empty one.
func TestDialByURL(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := natstest.Start(t)
	conn, err := Dial(config.Settings{NATSURL: srv.ClientURL()}, "test", logger)
	if err != nil {
		t.Fatal(err)
	}
	if !conn.NATS().IsConnected() {
		t.Error("not connected")
	}
	conn.Close()
	if !srv.Running() {
		t.Error("Close stopped a server it does not own")
	}

	if _, err := Dial(config.Settings{}, "test", logger); err == nil || !strings.Contains(err.Error(), "DETOUR_NATS_URL is empty") {
		t.Errorf("Dial with no URL: %v", err)
	}
}

// TestConnURLHidesCredentials: the URL a processor logs at start names the
// server but not its password or token.
func TestConnURLHidesCredentials(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name string
		opts *server.Options
		url  func(port int) string
		want func(port int) string
	}{
		{"password", &server.Options{Username: "alice", Password: "s3cret"},
			func(port int) string { return fmt.Sprintf("nats://alice:s3cret@127.0.0.1:%d", port) },
			func(port int) string { return fmt.Sprintf("nats://alice:xxxxx@127.0.0.1:%d", port) }},
		{"token", &server.Options{Authorization: "t0ken"},
			func(port int) string { return fmt.Sprintf("nats://t0ken@127.0.0.1:%d", port) },
			func(port int) string { return fmt.Sprintf("nats://xxxxx@127.0.0.1:%d", port) }},
		{"none", &server.Options{},
			func(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) },
			func(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := natstest.StartWith(t, tt.opts)
			port := srv.Addr().(*net.TCPAddr).Port
			conn, err := Dial(config.Settings{NATSURL: tt.url(port)}, "test", logger)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if got := conn.URL(); got != tt.want(port) {
				t.Errorf("URL() = %q, want %q", got, tt.want(port))
			}
		})
	}
}

// TestAConnectionTheNetworkStopsCarryingIsNoticed: a partition keeps the
// TCP connection open and carries nothing; only the client's pings tell.
// With DETOUR_NATS_PING_INTERVAL and DETOUR_NATS_MAX_PINGS_OUT the processor
// takes such a connection as lost and logs it while the partition lasts
// (the client's own default would wait over four minutes), and reconnects
// once it heals. The wait is 20 s, two hundred ping intervals.
func TestAConnectionTheNetworkStopsCarryingIsNoticed(t *testing.T) {
	srv := natstest.Start(t)
	proxy := natstest.StartProxy(t, srv.Addr().String())
	var log lockedBuffer
	conn, err := Dial(config.Settings{NATSURL: proxy.URL(), NATSPingInterval: 100 * time.Millisecond, NATSMaxPingsOut: 2},
		"test", slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	proxy.Blackhole()
	waitFor(t, "the disconnect to be logged", func() bool { return strings.Contains(log.String(), "disconnected from NATS") })
	if !strings.Contains(log.String(), "stale connection") {
		t.Errorf("the disconnect does not name the stale connection:\n%s", log.String())
	}
	proxy.Restore()
	waitFor(t, "the reconnect to be logged", func() bool { return strings.Contains(log.String(), "reconnected to NATS") })
}
