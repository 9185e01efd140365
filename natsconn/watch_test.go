package natsconn

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/internal/natstest"
)

// lockedBuffer is a log destination the client's callback goroutine and the
// test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWatch: a disconnect and a reconnect are logged, the URL with
// its password hidden; when the server comes back refusing the credentials,
// the client closes for good and lost receives why, as ErrLost,
// without the password. A close on purpose, with the closed handler
// replaced first, logs nothing.
func TestWatch(t *testing.T) {
	const user, password = "u", "pw-not-for-logs"
	dir := t.TempDir()
	first := natstest.StartWith(t, &server.Options{StoreDir: dir, Username: user, Password: password})
	port := first.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, password, port)
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var logs lockedBuffer
	lost := make(chan error, 1)
	Watch(nc, slog.New(slog.NewTextHandler(&logs, nil)), func(err error) { lost <- err })

	restart := func(pw string) {
		t.Helper()
		first.Shutdown()
		first.WaitForShutdown()
		first = natstest.StartWith(t, &server.Options{Port: port, StoreDir: dir, Username: user, Password: pw})
	}
	restart(password)
	waitFor(t, "a reconnect", func() bool { return strings.Contains(logs.String(), "reconnected to NATS") })
	if want := fmt.Sprintf("url=nats://%s:xxxxx@127.0.0.1:%d", user, port); !strings.Contains(logs.String(), want) {
		t.Errorf("log does not name the server as %s:\n%s", want, logs.String())
	}
	if !strings.Contains(logs.String(), "disconnected from NATS; reconnecting") {
		t.Errorf("log does not report the disconnect:\n%s", logs.String())
	}

	restart("another")
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLost) || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("lost(%v), want ErrLost naming the authorization violation", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the connection did not close after its credentials were refused; log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), password) {
		t.Errorf("the log holds the password:\n%s", logs.String())
	}

	// A close on purpose: the owner replaces the closed handler first.
	other, err := nats.Connect(first.ClientURL(), nats.UserInfo(user, "another"))
	if err != nil {
		t.Fatal(err)
	}
	var quiet lockedBuffer
	Watch(other, slog.New(slog.NewTextHandler(&quiet, nil)), func(err error) { t.Errorf("lost(%v) on a close on purpose", err) })
	closed := make(chan struct{})
	other.SetClosedHandler(func(*nats.Conn) { close(closed) })
	other.Close()
	<-closed // the client runs its callbacks in order: the disconnect one has run
	if quiet.String() != "" {
		t.Errorf("a close on purpose was logged:\n%s", quiet.String())
	}
}

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchHidesAToken: a token URL (nats://TOKEN@host) is logged
// on reconnect without the token.
func TestWatchHidesAToken(t *testing.T) {
	const token = "tok-not-for-logs"
	dir := t.TempDir()
	srv := natstest.StartWith(t, &server.Options{StoreDir: dir, Authorization: token})
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(fmt.Sprintf("nats://%s@127.0.0.1:%d", token, port), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var logs lockedBuffer
	Watch(nc, slog.New(slog.NewTextHandler(&logs, nil)), func(error) {})
	srv.Shutdown()
	srv.WaitForShutdown()
	natstest.StartWith(t, &server.Options{Port: port, StoreDir: dir, Authorization: token})
	waitFor(t, "a reconnect", func() bool { return strings.Contains(logs.String(), "reconnected to NATS") })
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log holds the token:\n%s", logs.String())
	}
}
