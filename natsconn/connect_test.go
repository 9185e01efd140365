package natsconn

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"no user", "nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"password", "nats://alice:s3cret@host:4222", "nats://alice:xxxxx@host:4222"},
		{"empty password", "nats://alice:@host", "nats://alice:xxxxx@host"},
		{"token", "nats://t0ken@host:4222", "nats://xxxxx@host:4222"},
		{"tls scheme", "tls://alice:s3cret@host", "tls://alice:xxxxx@host"},
		{"no scheme", "alice:s3cret@host:4222", "alice:xxxxx@host:4222"},
		{"does not parse", "nats://alice:p%zz@host", "nats://alice:xxxxx@host"},
		{"unescaped slash and at", "nats://alice:pa/ss@rd@host", "nats://alice:xxxxx@host"},
		{"list", "nats://a:pw1@h1:4222,nats://t0ken@h2:4222,nats://h3:4222",
			"nats://a:xxxxx@h1:4222,nats://xxxxx@h2:4222,nats://h3:4222"},
		{"list with spaces", "nats://h1:4222, nats://a:pw@h2:4222", "nats://h1:4222, nats://a:xxxxx@h2:4222"},
		{"list without schemes", "a:pw@h1:4222, t0ken@h2", "a:xxxxx@h1:4222, xxxxx@h2"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactURL(tt.in); got != tt.want {
				t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	seed := "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"
	jwt := "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJYIn0.c2lnbmF0dXJl"
	got := scrub("bad seed "+seed+" for "+jwt+" at nats://u:p%40ss@h (p@ss)", urlSecrets("nats://u:p%40ss@h"))
	for _, secret := range []string{seed, jwt, "p%40ss", "p@ss"} {
		if strings.Contains(got, secret) {
			t.Errorf("scrubbed text %q still holds %q", got, secret)
		}
	}
	if want := "bad seed xxxxx for xxxxx at nats://u:xxxxx@h (xxxxx)"; got != want {
		t.Errorf("scrub = %q, want %q", got, want)
	}
}

// TestConnectWithCredentials is the happy path of DETOUR_NATS_CREDS: a user
// of the operator's account connects and uses JetStream.
func TestConnectWithCredentials(t *testing.T) {
	srv, op := natstest.StartOperator(t)
	nc, err := Connect(srv.ClientURL(), ConnectOptions{Name: "test", Creds: op.Creds(t, "processor")})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream account info: %v", err)
	}
}

// TestConnectWithClientCertificate is the happy path of DETOUR_NATS_TLS_*:
// the server is verified against the CA and accepts the client certificate.
func TestConnectWithClientCertificate(t *testing.T) {
	files := natstest.NewTLSFiles(t)
	srv := natstest.StartTLS(t, files, true)
	addr := srv.Addr().String()
	// nats:// upgrades to TLS when the server requires it; tls:// insists.
	for _, url := range []string{"nats://" + addr, "tls://" + addr} {
		nc, err := Connect(url, ConnectOptions{Name: "test", TLSCA: files.CA, TLSCert: files.ClientCert, TLSKey: files.ClientKey})
		if err != nil {
			t.Fatalf("Connect(%s): %v", url, err)
		}
		if _, err := nc.TLSConnectionState(); err != nil {
			t.Errorf("Connect(%s): not a TLS connection: %v", url, err)
		}
		nc.Close()
	}
}

// TestConnectFailsFast: every misconfiguration an operator can make fails
// promptly, says what is wrong, and leaks no secret.
func TestConnectFailsFast(t *testing.T) {
	opSrv, op := natstest.StartOperator(t)
	files := natstest.NewTLSFiles(t)
	tlsSrv := natstest.StartTLS(t, files, true)
	other := natstest.NewTLSFiles(t)
	plain := natstest.Start(t)
	wrongCreds := op.WrongCreds(t)

	tests := []struct {
		name string
		url  string
		opts ConnectOptions
		is   error    // errors.Is target, if any
		want []string // in the error text
	}{
		{"wrong creds", opSrv.ClientURL(), ConnectOptions{Creds: wrongCreds}, nats.ErrAuthorization,
			[]string{"authorization violation", "rejected the credentials in " + wrongCreds}},
		{"no creds", opSrv.ClientURL(), ConnectOptions{}, nats.ErrAuthorization,
			[]string{"authorization violation", "requires credentials and none were given"}},
		{"missing creds file", opSrv.ClientURL(), ConnectOptions{Creds: t.TempDir() + "/nope.creds"}, os.ErrNotExist,
			[]string{"cannot read the credentials file", "nope.creds", "no such file"}},
		{"password in the URL", strings.Replace(opSrv.ClientURL(), "nats://", "nats://bob:hunter2@", 1), ConnectOptions{}, nats.ErrAuthorization,
			[]string{"authorization violation", "user and password or token of the URL", "bob:xxxxx@"}},
		{"wrong CA", tlsSrv.ClientURL(), ConnectOptions{TLSCA: other.CA, TLSCert: files.ClientCert, TLSKey: files.ClientKey}, nil,
			[]string{"not signed by the CA in " + other.CA, "certificate signed by unknown authority"}},
		{"no CA", tlsSrv.ClientURL(), ConnectOptions{TLSCert: files.ClientCert, TLSKey: files.ClientKey}, nil,
			[]string{"not signed by a CA of the system", "unknown authority"}},
		{"no client certificate", tlsSrv.ClientURL(), ConnectOptions{TLSCA: files.CA}, nil,
			[]string{"a TLS client certificate and none was given"}},
		{"client certificate of another CA", tlsSrv.ClientURL(), ConnectOptions{TLSCA: files.CA, TLSCert: other.ClientCert, TLSKey: other.ClientKey}, nil,
			[]string{"refused the TLS client certificate " + other.ClientCert}},
		{"missing CA file", tlsSrv.ClientURL(), ConnectOptions{TLSCA: t.TempDir() + "/ca.pem"}, os.ErrNotExist,
			[]string{"cannot read the TLS CA file"}},
		{"TLS to a plain server", plain.ClientURL(), ConnectOptions{TLSCA: files.CA}, nats.ErrSecureConnWanted,
			[]string{"server does not offer it"}},
		{"nothing listening", "nats://carol:pw0rd@" + closedAddr(t), ConnectOptions{}, nats.ErrNoServers,
			[]string{"no server accepted a connection", "carol:xxxxx@"}},
		{"URL that does not parse", "nats://carol:p%zzw0rd@127.0.0.1:1", ConnectOptions{}, nil,
			[]string{"the URL is malformed", "carol:xxxxx@"}},
	}
	secrets := append(natstest.CredsSecrets(t, wrongCreds), "hunter2", "pw0rd", "p%zzw0rd")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			nc, err := Connect(tt.url, tt.opts)
			elapsed := time.Since(start)
			if err == nil {
				nc.Close()
				t.Fatal("Connect succeeded")
			}
			if elapsed > 10*time.Second {
				t.Errorf("Connect took %s to fail", elapsed)
			}
			var ce *ConnectError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *ConnectError", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false for %v", tt.is, err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range tt.want {
				// The server's words arrive in its own case ("Authorization Violation").
				if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			for _, s := range secrets {
				if strings.Contains(msg, s) {
					t.Errorf("error %q holds the secret %q", msg, s)
				}
			}
		})
	}
}

// TestConnectToASilentServer: a server that accepts the connection and never
// speaks fails Connect after the handshake timeout instead of hanging it.
func TestConnectToASilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	nc, err := Connect("nats://"+l.Addr().String(), ConnectOptions{})
	if err == nil {
		nc.Close()
		t.Fatal("Connect to a silent server succeeded")
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Connect took %s to fail", elapsed)
	}
	if !strings.Contains(err.Error(), "did not answer within") {
		t.Errorf("error %q does not say the server did not answer", err)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
