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
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
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
	check := fatalIf(t, "TLS files")
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	f := TLSFiles{
		CA:         path("ca.pem"),
		ServerCert: path("server.pem"), ServerKey: path("server-key.pem"),
		ClientCert: path("client.pem"), ClientKey: path("client-key.pem"),
	}
	// issue has parent (nil: tmpl itself) sign tmpl for a new key, and
	// writes both as PEM.
	issue := func(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		check(err)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		check(err)
		cert, err := x509.ParseCertificate(der)
		check(err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		check(err)
		check(writePEM(certPath, "CERTIFICATE", der))
		if keyPath != "" {
			check(writePEM(keyPath, "PRIVATE KEY", keyDER))
		}
		return cert, key
	}
	caTmpl := certTemplate("detour test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	ca, caKey := issue(caTmpl, nil, nil, f.CA, "")

	srvTmpl := certTemplate("detour test server")
	srvTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	srvTmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	srvTmpl.DNSNames = []string{"localhost"}
	issue(srvTmpl, ca, caKey, f.ServerCert, f.ServerKey)
	cliTmpl := certTemplate("detour test client")
	cliTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	issue(cliTmpl, ca, caKey, f.ClientCert, f.ClientKey)
	return f
}

// fatalIf returns a check that fails t on an error, saying what failed.
func fatalIf(t testing.TB, what string) func(error) {
	return func(err error) {
		if err != nil {
			t.Helper()
			t.Fatalf("natstest: %s: %v", what, err)
		}
	}
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
	fatalIf(t, "server TLS config")(err)
	return StartWith(t, &server.Options{TLS: true, TLSVerify: verifyClients, TLSConfig: tc, TLSTimeout: 2})
}

// Operator is the trust chain of a server in operator (JWT) mode: an
// operator, a system account and one JetStream-enabled account whose users
// [Operator.Creds] issues.
type Operator struct {
	account nkeys.KeyPair
}

// StartOperator runs a JetStream server in operator mode and returns it with
// its operator: a new one, with a system account and one account with
// unlimited JetStream, both held in the server's in-memory account resolver.
func StartOperator(t testing.TB) (*server.Server, *Operator) {
	t.Helper()
	check := fatalIf(t, "operator")
	opKP, err := nkeys.CreateOperator()
	check(err)
	opPub, err := opKP.PublicKey()
	check(err)
	resolver := &server.MemAccResolver{}
	// addAccount creates an account, signs its JWT with the operator key
	// and stores it where the server will look it up.
	addAccount := func(name string, limits jwt.JetStreamLimits) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		check(err)
		pub, err := kp.PublicKey()
		check(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		ac.Limits.JetStreamLimits = limits
		token, err := ac.Encode(opKP)
		check(err)
		check(resolver.Store(pub, token))
		return kp, pub
	}
	_, sysPub := addAccount("SYS", jwt.JetStreamLimits{})
	// An account JWT without JetStream limits has no JetStream at all.
	accKP, _ := addAccount("DETOUR", jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit,
		Streams: jwt.NoLimit, Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
	})
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name, oc.SystemAccount = "detour-test-operator", sysPub
	token, err := oc.Encode(opKP)
	check(err)
	// The server wants the claims as a decoded, issued JWT: Issuer set.
	opClaims, err := jwt.DecodeOperatorClaims(token)
	check(err)
	srv := StartWith(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: resolver, SystemAccount: sysPub})
	return srv, &Operator{account: accKP}
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
	fatalIf(t, "account")(err)
	return writeCreds(t, stranger, "stranger")
}

// writeCreds creates a user signed by account and writes its JWT and seed
// as a .creds file, returning its path.
func writeCreds(t testing.TB, account nkeys.KeyPair, user string) string {
	t.Helper()
	check := fatalIf(t, "user "+user)
	kp, err := nkeys.CreateUser()
	check(err)
	pub, err := kp.PublicKey()
	check(err)
	uc := jwt.NewUserClaims(pub)
	uc.Name = user
	token, err := uc.Encode(account)
	check(err)
	seed, err := kp.Seed()
	check(err)
	creds, err := jwt.FormatUserConfig(token, seed)
	check(err)
	path := filepath.Join(t.TempDir(), user+".creds")
	check(os.WriteFile(path, creds, 0o600))
	return path
}

// CredsSecrets returns the JWT and the seed of a .creds file, for tests that
// check they never appear in output.
func CredsSecrets(t testing.TB, path string) []string {
	t.Helper()
	check := fatalIf(t, "secrets of "+path)
	data, err := os.ReadFile(path)
	check(err)
	token, err := jwt.ParseDecoratedJWT(data)
	check(err)
	user, err := jwt.ParseDecoratedUserNKey(data)
	check(err)
	seed, err := user.Seed()
	check(err)
	return []string{token, string(seed)}
}
