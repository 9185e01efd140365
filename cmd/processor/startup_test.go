package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// embeddedEnv is the environment of a processor that starts its embedded
// server on listen: the caller's environment without DETOUR_* variables,
// no metrics server, and TMPDIR set to tmp, so that a temporary store can
// be seen to come and go.
func embeddedEnv(listen, tmp string, settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DETOUR_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	env = append(env, "DETOUR_LISTEN="+listen, "DETOUR_METRICS_ADDR=", "TMPDIR="+tmp)
	return append(env, settings...)
}

// entries lists a directory's entries by name.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

// TestBusyListenFailsAtOnce: with DETOUR_LISTEN taken, the processor (with a
// chain file, and as the demo) exits 1 within a second or so, names the
// address and what to do, and creates nothing: no ./detour-data, no
// temporary store.
func TestBusyListenFailsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	bin := buildProcessor(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	chainFile := writeChainFile(t, "http://127.0.0.1:1/v1", "m")
	for name, args := range map[string][]string{"run": nil, "demo": {"-demo"}} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			start := time.Now()
			p := startProcessArgs(t, bin, name, embeddedEnv(addr, tmp, "DETOUR_CONFIG="+chainFile), args...)
			// Generous for a loaded machine; the start-up used to wait 10 s.
			code, exited := p.exitCode(3 * time.Second)
			if !exited {
				t.Fatalf("still running %v after start", time.Since(start))
			}
			t.Logf("exited %d after %v", code, time.Since(start).Round(time.Millisecond))
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			want := "embedded NATS server: " + addr + ": address in use (by another processor or NATS server?); " +
				"set DETOUR_LISTEN to a free host:port, or DETOUR_NATS_URL to use the server there"
			if !strings.Contains(p.out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, p.out.String())
			}
			if got := entries(t, p.cmd.Dir); len(got) != 0 {
				t.Errorf("the working directory holds %v", got)
			}
			if got := entries(t, tmp); len(got) != 0 {
				t.Errorf("TMPDIR holds %v", got)
			}
		})
	}
}

// TestStartUpAndShutdownLogs: a processor logs the chain file and its
// chains, the NATS URL it connected to with the password hidden, its
// chains and workers, and at shutdown how many deliveries it handed back.
func TestStartUpAndShutdownLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	bin := buildProcessor(t)
	srv := natstest.StartWith(t, &server.Options{Username: "alice", Password: "s3cret"})
	port := srv.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("nats://alice:s3cret@127.0.0.1:%d", port)
	chainFile := writeChainFile(t, "http://127.0.0.1:1/v1", "m")
	p := startProcess(t, bin, "logs", processorEnv(t, url, chainFile, "DETOUR_WORKERS=3"))
	waitConsuming(t, p)
	p.stop(t, 10*time.Second)
	out := p.out.String()
	for _, want := range []string{
		`msg="chain file read" path=` + chainFile + ` chains="default: primary"`,
		fmt.Sprintf(`msg="connected to NATS" url=nats://alice:xxxxx@127.0.0.1:%d`+"\n", port),
		`msg=processing chains=[default] workers=3`,
		`msg="shutdown complete" handed_back=0` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the log shows the password:\n%s", out)
	}
}

// TestDemoStore: without DETOUR_DATA_DIR the demo's store is temporary and
// deleted on exit, and nothing is created in the working directory.
func TestDemoTemporaryStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	bin := buildProcessor(t)
	tmp := t.TempDir()
	p := startProcessArgs(t, bin, "demo", embeddedEnv(freeAddr(t), tmp), "-demo")
	waitConsuming(t, p)
	m := regexp.MustCompile(`msg="demo: a temporary store, deleted on exit \(set DETOUR_DATA_DIR to keep it\)" data_dir=(\S+)`).FindStringSubmatch(p.out.String())
	if m == nil || !strings.HasPrefix(m[1], filepath.Join(tmp, "detour-demo-")) {
		t.Fatalf("no temporary store under TMPDIR logged:\n%s", p.out.String())
	}
	if _, err := os.Stat(m[1]); err != nil {
		t.Fatalf("the temporary store: %v", err)
	}
	p.stop(t, 10*time.Second)
	if got := entries(t, tmp); len(got) != 0 {
		t.Errorf("TMPDIR holds %v after exit", got)
	}
	if got := entries(t, p.cmd.Dir); len(got) != 0 {
		t.Errorf("the working directory holds %v", got)
	}
}

// TestDemoKeepsItsStoreAndIsInspected: with DETOUR_DATA_DIR the demo keeps
// its store there, so what it answered is still there after a restart; and
// beside it, with no chain file anywhere, status lists providers without a
// warning, dlq and watch work, and check -demo checks the demo's chain.
func TestDemoKeepsItsStoreAndIsInspected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	bin := buildProcessor(t)
	addr, dataDir := freeAddr(t), filepath.Join(t.TempDir(), "store")
	env := embeddedEnv(addr, t.TempDir(), "DETOUR_DATA_DIR="+dataDir)
	first := startProcessArgs(t, bin, "demo", env, "-demo")
	waitConsuming(t, first)
	if want := `msg="demo: keeping its store in DETOUR_DATA_DIR" data_dir=` + dataDir + "\n"; !strings.Contains(first.out.String(), want) {
		t.Errorf("log lacks %q", want)
	}
	// The demo asks itself a question every 2 s; the backup answers while
	// the primary is down.
	waitUntil(t, 30*time.Second, "the demo's first answer", func() bool {
		return strings.Contains(first.out.String(), `msg="demo: answered"`)
	}, first)

	// The client commands, in this process, beside the demo: no
	// DETOUR_NATS_URL, DETOUR_CONFIG or chain file.
	samples, err := filepath.Abs("../../examples/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "DETOUR_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("DETOUR_LISTEN", addr)
	var out, errOut bytes.Buffer
	if code := run([]string{"status"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Errorf("status: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if !regexp.MustCompile(`(?m)^primary +(open|closed|half-open) +\d+`).MatchString(out.String()) {
		t.Errorf("status lists no primary:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"dlq", "list"}, &out, &errOut); code != 0 || out.String() != "no dead letters\n" {
		t.Errorf("dlq list: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	out.Reset()
	code := run([]string{"check", "-demo", "-samples", samples}, &out, &errOut)
	if code != 1 {
		t.Errorf("check -demo: exit %d, want 1 (primary is down in its first minute)", code)
	}
	for _, want := range []string{`(?m)^primary +demo-large +FAIL server +FAIL server$`, `(?m)^backup +demo-small +ok \d+ms +ok \d+ms$`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("check -demo lacks %s:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
		}
	}
	watch := startProcessArgs(t, bin, "watch", embeddedEnv(addr, t.TempDir()), "watch")
	waitUntil(t, 10*time.Second, "watch to start", func() bool {
		return strings.Contains(watch.out.String(), "watching detour_providers")
	}, watch)
	watch.signal(t, syscall.SIGINT)
	if code, exited := watch.exitCode(10 * time.Second); !exited || code != 0 {
		t.Errorf("watch after SIGINT: exited %t, code %d", exited, code)
	}

	answered := time.Now()
	first.stop(t, 15*time.Second)
	second := startProcessArgs(t, bin, "demo again", env, "-demo")
	waitConsuming(t, second)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	results, err := js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := results.GetMsg(context.Background(), 1)
	if err != nil || !m.Time.Before(answered) || !strings.HasPrefix(m.Subject, wire.ResultsPrefix+"demo-") {
		t.Errorf("the first run's first result after a restart: %v, %v", m, err)
	}
	second.stop(t, 15*time.Second)
	if _, err := os.Stat(filepath.Join(dataDir, "jetstream")); err != nil {
		t.Errorf("the store: %v", err)
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Log(entries(t, dataDir))
	}
}

// TestBusyMetricsAddrChangesNothingOnTheServer: a processor whose metrics
// port is taken exits before it sets up its streams: the NATS server, which
// other processors share, is left as it was.
func TestBusyMetricsAddrChangesNothingOnTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the processor and runs it as an OS process")
	}
	bin := buildProcessor(t)
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	chainFile := writeChainFile(t, "http://127.0.0.1:1/v1", "m")
	env := embeddedEnv(freeAddr(t), t.TempDir(), "DETOUR_CONFIG="+chainFile, "DETOUR_NATS_URL="+srv.ClientURL(),
		"DETOUR_METRICS_ADDR="+busy.Addr().String())
	p := startProcessArgs(t, bin, "busy-metrics", env)
	code, exited := p.exitCode(10 * time.Second)
	if !exited || code != 1 || !strings.Contains(p.out.String(), "set DETOUR_METRICS_ADDR to a free host:port") {
		t.Fatalf("exited %v with %d; want 1 naming DETOUR_METRICS_ADDR:\n%s", exited, code, p.out.String())
	}
	for name := range js.StreamNames(context.Background()).Name() {
		t.Errorf("stream %s was created", name)
	}
}
