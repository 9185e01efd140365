package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/natsconn"
	"github.com/detourhq/detour/wire"
)

// rulesChain is a chain file that needs no provider outside the process.
const rulesChain = `providers:
  - name: template
    type: rules
    default_reply: "answered by the rules"
chains:
  default: [template]
`

// TestProcessorOnASecuredServer is the "Nothing lost" issue's external NATS
// with credentials and TLS, with the real binary: the right settings serve
// requests and stop cleanly on SIGTERM; a wrong one fails start-up quickly,
// non-zero, with the reason on stderr and no secret.
func TestProcessorOnASecuredServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the processor")
	}
	bin := buildCommand(t, "processor")
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	if err := os.WriteFile(chainFile, []byte(rulesChain), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("creds", func(t *testing.T) {
		srv, op := natstest.StartOperator(t)
		url := srv.ClientURL()
		wrong := op.WrongCreds(t)
		secrets := natstest.CredsSecrets(t, wrong)

		t.Run("wrong", func(t *testing.T) {
			out := failsToStart(t, bin, securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_CREDS="+wrong))
			mustSay(t, out, "authorization violation", "rejected the credentials in "+wrong)
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("stderr holds a secret of the creds file:\n%s", out)
				}
			}
		})
		t.Run("missing file", func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "detour.creds")
			out := failsToStart(t, bin, securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_CREDS="+missing))
			mustSay(t, out, "cannot read the credentials file", missing)
		})
		t.Run("none", func(t *testing.T) {
			out := failsToStart(t, bin, securedEnv(t, chainFile, "DETOUR_NATS_URL="+url))
			mustSay(t, out, "authorization violation", "requires credentials")
		})
		t.Run("right", func(t *testing.T) {
			env := securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_CREDS="+op.Creds(t, "processor"))
			servesAndStops(t, bin, env, url, natsconn.ConnectOptions{Name: "test", Creds: op.Creds(t, "publisher")})
		})
	})

	t.Run("tls", func(t *testing.T) {
		files := natstest.NewTLSFiles(t)
		other := natstest.NewTLSFiles(t)
		srv := natstest.StartTLS(t, files, true)
		url := srv.ClientURL()

		t.Run("no client certificate", func(t *testing.T) {
			out := failsToStart(t, bin, securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_TLS_CA="+files.CA))
			mustSay(t, out, "a TLS client certificate and none was given")
		})
		t.Run("wrong CA", func(t *testing.T) {
			out := failsToStart(t, bin, securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_TLS_CA="+other.CA,
				"DETOUR_NATS_TLS_CERT="+files.ClientCert, "DETOUR_NATS_TLS_KEY="+files.ClientKey))
			mustSay(t, out, "not signed by the CA in "+other.CA, "certificate signed by unknown authority")
		})
		t.Run("right", func(t *testing.T) {
			env := securedEnv(t, chainFile, "DETOUR_NATS_URL="+url, "DETOUR_NATS_TLS_CA="+files.CA,
				"DETOUR_NATS_TLS_CERT="+files.ClientCert, "DETOUR_NATS_TLS_KEY="+files.ClientKey)
			servesAndStops(t, bin, env, url, natsconn.ConnectOptions{
				Name: "test", TLSCA: files.CA, TLSCert: files.ClientCert, TLSKey: files.ClientKey,
			})
		})
	})
}

// failsToStart runs the processor and returns its output once it has exited
// non-zero, failing the test if it keeps running for 15s or exits 0.
func failsToStart(t *testing.T, bin string, env []string) string {
	t.Helper()
	p := startProcess(t, bin, "secured", env)
	start := time.Now()
	code, exited := p.exitCode(15 * time.Second)
	if !exited {
		t.Fatalf("processor still running after 15s; output:\n%s", p.out.String())
	}
	if code == 0 {
		t.Fatalf("processor exited 0; output:\n%s", p.out.String())
	}
	t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(p.out.String()))
	return p.out.String()
}

// servesAndStops runs the processor, has a client connected with opts
// publish a request, waits for its result in DETOUR_RESULTS, then stops the
// processor with SIGTERM and expects exit code 0.
func servesAndStops(t *testing.T, bin string, env []string, url string, opts natsconn.ConnectOptions) {
	t.Helper()
	p := startProcess(t, bin, "secured", env)
	nc, err := natsconn.Connect(url, opts)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The processor creates the streams once connected; until then the
	// publish finds no stream.
	id := nuid.Next()
	req := wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hello"}}}
	for {
		if _, err = c.Publish(ctx, "default", req); err == nil {
			break
		}
		if _, exited := p.exitCode(300 * time.Millisecond); exited || ctx.Err() != nil {
			t.Fatalf("publishing: %v\nprocessor output:\n%s", err, p.out.String())
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var res chain.Result
	for {
		res, err = resultInStream(ctx, js, id)
		if err == nil {
			break
		}
		if _, exited := p.exitCode(200 * time.Millisecond); exited || ctx.Err() != nil {
			t.Fatalf("no result for %s in %s: %v\nprocessor output:\n%s", id, wire.ResultsStream, err, p.out.String())
		}
	}
	if res.Status != chain.StatusOK || !strings.Contains(res.Content, "answered by the rules") {
		t.Errorf("result %+v, want ok from the rules", res)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, exited := p.exitCode(30 * time.Second)
	if !exited {
		t.Fatalf("processor did not stop on SIGTERM; output:\n%s", p.out.String())
	}
	if code != 0 {
		t.Fatalf("processor exited %d after SIGTERM; output:\n%s", code, p.out.String())
	}
}

// resultInStream reads the result of request id from DETOUR_RESULTS.
func resultInStream(ctx context.Context, js jetstream.JetStream, id string) (chain.Result, error) {
	s, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		return chain.Result{}, err
	}
	msg, err := s.GetLastMsgForSubject(ctx, wire.ResultSubject(id))
	if err != nil {
		return chain.Result{}, err
	}
	return wire.DecodeResult(msg.Data, msg.Header)
}

// securedEnv is a processor's environment with no DETOUR_* variable of the
// host, the chain file, a short shutdown timeout, and extra (which names the
// server and its credentials).
func securedEnv(t *testing.T, chainFile string, extra ...string) []string {
	t.Helper()
	return processorEnv(t, "", chainFile, append([]string{"DETOUR_SHUTDOWN_TIMEOUT=5s"}, extra...)...)
}

// mustSay fails the test unless out contains every phrase, ignoring case
// (the server's words arrive as "Authorization Violation").
func mustSay(t *testing.T, out string, phrases ...string) {
	t.Helper()
	for _, p := range phrases {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(p)) {
			t.Errorf("output does not say %q:\n%s", p, out)
		}
	}
}
