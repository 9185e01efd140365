package embedded_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/embedded"
)

// TestStartBusyAddress: an address another process listens on
// fails at once with ErrListenInUse, and the store is not created.
func TestStartBusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dataDir := filepath.Join(t.TempDir(), "detour-data")
	srv, err := embedded.Start(context.Background(), busy.Addr().String(), dataDir)
	if !errors.Is(err, embedded.ErrListenInUse) {
		if srv != nil {
			srv.Shutdown()
		}
		t.Fatalf("StartEmbedded on a busy address: %v; want ErrListenInUse", err)
	}
	if want := "stream: embedded server address " + busy.Addr().String() + ": address in use"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was created: %v", err)
	}
}

// TestStartStoppedDuringStartUp: a context that ends during
// start-up stops the server and returns the context's error; the address
// is free again.
func TestStartStoppedDuringStartUp(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv, err := embedded.Start(ctx, addr, t.TempDir())
	if !errors.Is(err, context.Canceled) || srv != nil {
		t.Fatalf("StartEmbedded with its context ended: %v, %v; want context.Canceled", srv, err)
	}
	if err := embedded.CheckListen(addr); err != nil {
		t.Fatalf("the address is still taken: %v", err)
	}
}

// TestStart: a free address starts a server that takes
// connections.
func TestStart(t *testing.T) {
	addr := freeAddr(t)
	srv, err := embedded.Start(context.Background(), addr, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(time.Second) || !errors.Is(embedded.CheckListen(addr), embedded.ErrListenInUse) {
		t.Fatal("the server does not listen")
	}
}

// freeAddr is a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
