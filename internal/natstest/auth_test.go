package natstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
)

// TestOperatorModeHasJetStream checks that a user of the operator's account
// can use JetStream and that a stranger's creds are refused.
func TestOperatorModeHasJetStream(t *testing.T) {
	srv, op := natstest.StartOperator(t)
	_, js := natstest.ConnectWith(t, srv.ClientURL(), nats.UserCredentials(op.Creds(t, "alice")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatalf("JetStream in the operator's account: %v", err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("x")); err != nil {
		t.Fatalf("publish: %v", err)
	}

	nc, err := nats.Connect(srv.ClientURL(), nats.UserCredentials(op.WrongCreds(t)), nats.Timeout(5*time.Second))
	if err == nil {
		nc.Close()
		t.Fatal("a user of an unknown account connected")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong creds: got %v, want an authorization violation", err)
	}
}

// TestTLSRequiresTheClientCertificate checks the PKI: the server's
// certificate verifies against the CA, and with verifyClients a connection
// without the client certificate is refused.
func TestTLSRequiresTheClientCertificate(t *testing.T) {
	files := natstest.NewTLSFiles(t)
	srv := natstest.StartTLS(t, files, true)
	nc, _ := natstest.ConnectWith(t, srv.ClientURL(), nats.RootCAs(files.CA), nats.ClientCert(files.ClientCert, files.ClientKey))
	if !nc.TLSRequired() {
		t.Fatal("server does not require TLS")
	}

	nc2, err := nats.Connect(srv.ClientURL(), nats.RootCAs(files.CA), nats.Timeout(5*time.Second))
	if err == nil {
		nc2.Close()
		t.Fatal("connected without a client certificate")
	}
	t.Logf("without a client certificate: %v", err)

	other := natstest.NewTLSFiles(t)
	nc3, err := nats.Connect(srv.ClientURL(), nats.RootCAs(other.CA), nats.ClientCert(files.ClientCert, files.ClientKey), nats.Timeout(5*time.Second))
	if err == nil {
		nc3.Close()
		t.Fatal("verified the server against another CA")
	}
	t.Logf("with another CA: %v", err)
}
