package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// TLSFiles are the PEM files of a throwaway PKI: one CA that signs a server
// certificate for 127.0.0.1, ::1 and localhost, and a client certificate.
// A second NewTLSFiles has a different CA, so its CA is the "wrong CA" of
// the first.
type TLSFiles struct {
	CA                    string // CA certificate
	ServerCert, ServerKey string // server certificate and its key
	ClientCert, ClientKey string // client certificate and its key
}

// NewTLSFiles writes a fresh CA, server and client certificate with their
// keys into a temp dir of t.
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	f, err := writePKI(t.TempDir())
	if err != nil {
		t.Fatalf("natstest: TLS files: %v", err)
	}
	return f
}

func writePKI(dir string) (TLSFiles, error) {
	path := func(name string) string { return filepath.Join(dir, name) }
	f := TLSFiles{
		CA:         path("ca.pem"),
		ServerCert: path("server.pem"), ServerKey: path("server-key.pem"),
		ClientCert: path("client.pem"), ClientKey: path("client-key.pem"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	caTmpl := certTemplate("detour test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}

	srvTmpl := certTemplate("detour test server")
	srvTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	srvTmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	srvTmpl.DNSNames = []string{"localhost"}
	if err := writeLeaf(f.ServerCert, f.ServerKey, srvTmpl, ca, caKey); err != nil {
		return f, err
	}
	cliTmpl := certTemplate("detour test client")
	cliTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return f, writeLeaf(f.ClientCert, f.ClientKey, cliTmpl, ca, caKey)
}

// certTemplate is a certificate valid from an hour ago for a day.
func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) // never fails with crypto/rand
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// writeLeaf creates a key, has ca sign tmpl for it, and writes both as PEM.
func writeLeaf(certPath, keyPath string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// StartTLS runs a JetStream server that requires TLS with the server
// certificate of files; with verifyClients it also requires a client
// certificate signed by files.CA.
func StartTLS(t testing.TB, files TLSFiles, verifyClients bool) *server.Server {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: files.ServerCert, KeyFile: files.ServerKey, CaFile: files.CA, Verify: verifyClients,
	})
	if err != nil {
		t.Fatalf("natstest: server TLS config: %v", err)
	}
	return StartWith(t, &server.Options{TLS: true, TLSVerify: verifyClients, TLSConfig: tc, TLSTimeout: 2})
}

// Operator is the trust chain of a server in operator (JWT) mode: an
// operator, a system account and one JetStream-enabled account whose users
// [Operator.Creds] issues.
type Operator struct {
	operator *jwt.OperatorClaims
	account  nkeys.KeyPair
	sysPub   string
	resolver *server.MemAccResolver
}

// NewOperator creates an operator with a system account and one account
// with unlimited JetStream, both held in an in-memory account resolver.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	o, err := newOperator()
	if err != nil {
		t.Fatalf("natstest: operator: %v", err)
	}
	return o
}

func newOperator() (*Operator, error) {
	opKP, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	opPub, err := opKP.PublicKey()
	if err != nil {
		return nil, err
	}
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "detour-test-operator"
	resolver := &server.MemAccResolver{}
	// addAccount creates an account, signs its JWT with the operator key
	// and stores it where the server will look it up.
	addAccount := func(name string, limits jwt.JetStreamLimits) (nkeys.KeyPair, string, error) {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			return nil, "", err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, "", err
		}
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		ac.Limits.JetStreamLimits = limits
		token, err := ac.Encode(opKP)
		if err != nil {
			return nil, "", err
		}
		return kp, pub, resolver.Store(pub, token)
	}
	_, sysPub, err := addAccount("SYS", jwt.JetStreamLimits{})
	if err != nil {
		return nil, err
	}
	// An account JWT without JetStream limits has no JetStream at all.
	accKP, _, err := addAccount("DETOUR", jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit,
		Streams: jwt.NoLimit, Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
	})
	if err != nil {
		return nil, err
	}
	oc.SystemAccount = sysPub
	token, err := oc.Encode(opKP)
	if err != nil {
		return nil, err
	}
	// The server wants the claims as a decoded, issued JWT: Issuer set.
	opClaims, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		return nil, err
	}
	return &Operator{operator: opClaims, account: accKP, sysPub: sysPub, resolver: resolver}, nil
}

// Options are server options for operator mode; pass them to [StartWith],
// after adding TLS or other settings if needed.
func (o *Operator) Options() *server.Options {
	return &server.Options{
		TrustedOperators: []*jwt.OperatorClaims{o.operator},
		AccountResolver:  o.resolver,
		SystemAccount:    o.sysPub,
	}
}

// Creds writes a .creds file for a new user of the operator's JetStream
// account and returns its path.
func (o *Operator) Creds(t testing.TB, user string) string {
	t.Helper()
	return writeCreds(t, o.account, user)
}

// WrongCreds writes a well-formed .creds file whose user is signed by an
// account the server does not know, so connecting with it is an
// authorization violation.
func (o *Operator) WrongCreds(t testing.TB) string {
	t.Helper()
	stranger, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatalf("natstest: account: %v", err)
	}
	return writeCreds(t, stranger, "stranger")
}

// StartOperator runs a JetStream server in operator mode and returns it with
// its operator.
func StartOperator(t testing.TB) (*server.Server, *Operator) {
	t.Helper()
	o := NewOperator(t)
	return StartWith(t, o.Options()), o
}

// ConnectWith opens a client connection to url with opts, closed in cleanup,
// for servers that [Connect] cannot reach without credentials or TLS.
func ConnectWith(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

func writeCreds(t testing.TB, account nkeys.KeyPair, user string) string {
	t.Helper()
	creds, err := userCreds(account, user)
	if err != nil {
		t.Fatalf("natstest: user %s: %v", user, err)
	}
	path := filepath.Join(t.TempDir(), user+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatalf("natstest: writing creds: %v", err)
	}
	return path
}

// userCreds creates a user signed by account and formats its JWT and seed
// as a .creds file.
func userCreds(account nkeys.KeyPair, user string) ([]byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = user
	token, err := uc.Encode(account)
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(token, seed)
}

// CredsSecrets returns the JWT and the seed of a .creds file (the line after
// each BEGIN marker), for tests that check they never appear in output.
func CredsSecrets(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	lines := strings.Split(string(data), "\n")
	for i, line := range lines[:len(lines)-1] {
		if strings.HasPrefix(line, "-----BEGIN") {
			secrets = append(secrets, strings.TrimSpace(lines[i+1]))
		}
	}
	if len(secrets) != 2 {
		t.Fatalf("found %d secrets in %s, want a JWT and a seed", len(secrets), path)
	}
	return secrets
}
