package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
)

// startProcessor runs an embedded server and, on it, a processor process
// with chainFile until the test ends, points the publisher at it, and
// returns the server's URL. The processor is the real command, built once
// for the test binary: the publisher is tested against what it talks to in
// production.
func startProcessor(t *testing.T, chainFile string) (url string) {
	t.Helper()
	srv := natstest.Start(t)
	path := writeFile(t, "detour.yaml", chainFile)
	cmd := exec.Command(processorBinary(t))
	cmd.Dir = t.TempDir()
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DETOUR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DETOUR_NATS_URL="+srv.ClientURL(), "DETOUR_CONFIG="+path, "DETOUR_METRICS_ADDR=",
		"DETOUR_DATA_DIR="+t.TempDir(), "DETOUR_WORKERS=8", "DETOUR_REPLICAS=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("processor output:\n%s", out.String())
		}
	})
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	waitServing(t, srv.ClientURL(), exited, &out)
	return srv.ClientURL()
}

// waitServing waits until a processor serves detour.ask (its consumers and
// subjects are in place by then), failing the test if it exits first.
func waitServing(t *testing.T, url string, exited <-chan error, out *syncBuffer) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := nc.Request("$SRV.PING.detour", nil, time.Second); err == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("the processor exited (%v):\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no processor serving after a minute:\n%s", out.String())
		}
	}
}

// TestMain removes the processor binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// processorBinary builds ./cmd/processor once per test binary; the build
// cache makes it cheap when the processor's own tests have built it.
func processorBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "detour-publisher-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "processor")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goTool, "build", "-o", binPath, "../processor").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ../processor: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func soloChain(url string) string {
	return fmt.Sprintf("providers:\n  - {name: solo, type: openai, base_url: %s, model: solo-model}\nchains:\n  default: [solo]\n", url)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPublisher runs the command and returns its exit code and output.
func runPublisher(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), nil, args, strings.NewReader(""), &out, &errOut)
	t.Logf("publisher %s → %d\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

func TestFlagsRefuseWhatCannotRun(t *testing.T) {
	t.Setenv("DETOUR_NATS_URL", "nats://127.0.0.1:1") // never reached
	file := writeFile(t, "r.jsonl", `{"prompt":"x"}`+"\n")
	tests := map[string]struct {
		args []string
		want string
	}{
		"nothing to send":    {nil, "usage: publisher"},
		"prompt and file":    {[]string{"-f", file, "hello"}, "not both"},
		"-n with a file":     {[]string{"-f", file, "-n", "3"}, "-n copies a PROMPT"},
		"no copies":          {[]string{"-n", "0", "hello"}, "-n must be at least 1"},
		"a chain no subject": {[]string{"-chain", "de fault", "hello"}, `-chain "de fault": a chain is named as in the chain file`},
		"negative rate":      {[]string{"-rate", "-1", "hello"}, "-rate must not be negative"},
		"negative timeout":   {[]string{"-timeout", "-1s", "hello"}, "-timeout must not be negative"},
		"unknown flag":       {[]string{"-bogus", "hello"}, "flag provided but not defined"},
		"missing file":       {[]string{"-f", filepath.Join(t.TempDir(), "none.jsonl")}, "no such file"},
		"missing schema":     {[]string{"-schema", filepath.Join(t.TempDir(), "none.json"), "hello"}, "-schema"},
		"bad schema":         {[]string{"-schema", writeFile(t, "s.json", `{"type":"thing"}`), "hello"}, "response_schema"},
		"schema not object":  {[]string{"-schema", writeFile(t, "s.json", `[1]`), "hello"}, "not a JSON object"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := runPublisher(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
	if code, _, stderr := runPublisher(t, "-help"); code != 0 || !strings.Contains(stderr, "-rate") {
		t.Fatalf("-help: exit %d, %q", code, stderr)
	}
}

// TestABadLineSendsNothing: a file with one bad line is refused whole, with
// the line's number, before anything is published. A reply_to is bad when
// it is outside DETOUR_REPLY_PREFIXES, as the processors read it: they would
// dead-letter it.
func TestABadLineSendsNothing(t *testing.T) {
	tests := map[string]struct {
		prefixes string // DETOUR_REPLY_PREFIXES; "" for the default
		line     string
		want     string
	}{
		"wrong kind":       {"", `{"prompt":"two","max_tokens":"many"}`, `"max_tokens" must be a whole number`},
		"empty id":         {"", `{"id":"","prompt":"two"}`, `"id" is empty`},
		"outside defaults": {"", `{"prompt":"two","reply_to":"myapp.r2"}`, `must start with one of detour.results., _INBOX.`},
		"outside own":      {"myapp.", `{"prompt":"two","reply_to":"_INBOX.r2"}`, `must start with one of myapp.`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := natstest.Start(t)
			nc, _ := natstest.Connect(t, srv)
			var seen int
			var mu sync.Mutex
			if _, err := nc.Subscribe("detour.requests.>", func(*nats.Msg) { mu.Lock(); seen++; mu.Unlock() }); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
			if tt.prefixes != "" {
				t.Setenv("DETOUR_REPLY_PREFIXES", tt.prefixes)
			}
			file := writeFile(t, "r.jsonl", `{"prompt":"one"}`+"\n"+tt.line+"\n"+`{"prompt":"three"}`+"\n")
			code, _, stderr := runPublisher(t, "-f", file)
			if code != 2 || !strings.Contains(stderr, "1 bad line, nothing sent") || !strings.Contains(stderr, "line 2: ") || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming line 2 and %q", code, stderr, tt.want)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen != 0 {
				t.Fatalf("%d requests were published", seen)
			}
		})
	}
}

// TestAReplySubjectUnderTheProcessorsPrefixesIsSent: DETOUR_REPLY_PREFIXES
// widens what a file's reply_to may be, as it does for the processors.
func TestAReplySubjectUnderTheProcessorsPrefixesIsSent(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	err := topology.Ensure(context.Background(), js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 1000, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("detour.requests.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	t.Setenv("DETOUR_REPLY_PREFIXES", "myapp.")
	file := writeFile(t, "r.jsonl", `{"prompt":"one","reply_to":"myapp.r1"}`+"\n")
	if code, _, stderr := runPublisher(t, "-wait=false", "-f", file); code != 0 {
		t.Fatalf("exit %d, stderr %q; want the line sent", code, stderr)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("nothing published: %v", err)
	}
	if !strings.Contains(string(msg.Data), `"reply_to":"myapp.r1"`) {
		t.Fatalf("published %s; want its reply_to", msg.Data)
	}
}

func TestSingleRequestPrintsItsResult(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, stdout, _ := runPublisher(t, "-timeout", "20s", "hello")
	if code != 0 || !regexp.MustCompile(`(?m)^\S+  ok  model=solo-model provider=solo degraded=false attempts=1 latency=\d+ms\n  \S`).MatchString(stdout) {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if strings.Contains(stdout, "PROVIDER") {
		t.Fatal("a single request printed a summary")
	}
	code, stdout, _ = runPublisher(t, "-json", "hello")
	var res chain.Result
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || res.Status != chain.StatusOK || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("-json: exit %d, %v, stdout %q; want one result line", code, err, stdout)
	}
}

// TestBulkJSONEndsWithTheSummary: -f with -json prints one line per result
// and then the summary object.
func TestBulkJSONEndsWithTheSummary(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	var lines strings.Builder
	for i := range 6 {
		fmt.Fprintf(&lines, `{"id":"j-%d","prompt":"q%d"}`+"\n", i, i)
	}
	code, stdout, stderr := runPublisher(t, "-f", writeFile(t, "r.jsonl", lines.String()), "-rate", "200", "-json", "-timeout", "20s")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	ids := map[string]bool{}
	var summary map[string]json.RawMessage
	for sc.Scan() {
		if summary != nil {
			t.Fatalf("a line after the summary: %s", sc.Text())
		}
		var line struct {
			chain.Result
			Summary json.RawMessage `json:"summary"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Summary != nil {
			if err := json.Unmarshal(line.Summary, &summary); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if line.Status != chain.StatusOK || line.Model != "solo-model" {
			t.Errorf("result line %s", sc.Text())
		}
		ids[line.ID] = true
	}
	if len(ids) != 6 || summary == nil {
		t.Fatalf("%d result lines, summary %v; want 6 and a summary", len(ids), summary)
	}
	for key, want := range map[string]string{"requests": "6", "results": "6", "ok": "6", "failures": "0", "chain": `"default"`} {
		if got := string(summary[key]); got != want {
			t.Errorf("summary %s = %s, want %s", key, got, want)
		}
	}
}

// TestBulkTextWithSchema: -schema reaches every request, so the provider
// whose plain answers do not satisfy it is passed over, and the summary table
// shows the degraded answers; a request whose result never comes makes the
// exit code 1.
func TestBulkTextWithSchema(t *testing.T) {
	// plain never answers the prompt "lost", so that request's result
	// never comes.
	plain := providertest.New(providertest.OpenAI, func(n int, req providertest.Request) providertest.Reply {
		if req.Messages[len(req.Messages)-1].Content == "lost" {
			return providertest.Reply{Hang: true}
		}
		return providertest.OK()(n, req)
	})
	defer plain.Close()
	structured := providertest.New(providertest.OpenAI, providertest.JSON(map[string]string{"answer": "yes"}))
	defer structured.Close()
	startProcessor(t, fmt.Sprintf(`
providers:
  - {name: plain, type: openai, base_url: %s, model: plain-model, max_retries: 0}
  - {name: structured, type: openai, base_url: %s, model: structured-model}
chains:
  default: [plain, structured]
`, plain.URL, structured.URL))
	schema := writeFile(t, "schema.json", `{"type":"object","required":["answer"]}`)

	code, stdout, _ := runPublisher(t, "-n", "4", "-schema", schema, "-timeout", "20s", "hello")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`chain default: 4 requests, 4 sent, 4 results`),
		regexp.MustCompile(`ok 4, degraded 4 \(100\.0% of ok\), failed 0, no result 0, not sent 0`),
		regexp.MustCompile(`(?m)^PROVIDER +MODEL +REQUESTS +RESULTS +OK +DEGRADED +FAILED +LATENCY p50/p95/p99 +END-TO-END p50/p95/p99$`),
		regexp.MustCompile(`(?m)^structured +structured-model +4 +4 +4 +4 \(100\.0%\) +0 +\S+ ms +\S+ ms$`),
		regexp.MustCompile(`(?m)^TOTAL +4 +4 +4 +4 \(100\.0%\) +0 `),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("summary lacks %s", want)
		}
	}
	if plain.Requests() != 4 {
		t.Errorf("plain called %d times, want 4", plain.Requests())
	}

	file := writeFile(t, "r.jsonl", `{"id":"kept","prompt":"a"}`+"\n"+`{"id":"lost","prompt":"lost"}`+"\n")
	code, stdout, _ = runPublisher(t, "-f", file, "-schema", schema, "-timeout", "2s")
	if code != 1 || !strings.Contains(stdout, "no result 1") || !strings.Contains(stdout, "no result for: lost") ||
		!regexp.MustCompile(`(?m)^\(no result\) +- +1 +0 +0 +- +0 +- +-$`).MatchString(stdout) {
		t.Fatalf("exit %d; want 1 and the lost request named", code)
	}
}

func TestPublishWithoutWaiting(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, stdout, _ := runPublisher(t, "-wait=false", "-n", "3", "hello")
	if code != 0 || stdout != "published 3 request(s) to detour.requests.default\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runPublisher(t, "-wait=false", "-json", "hello")
	var out struct {
		Published int      `json:"published"`
		IDs       []string `json:"ids"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); code != 0 || err != nil || out.Published != 1 || len(out.IDs) != 1 {
		t.Fatalf("exit %d, %v, stdout %q", code, err, stdout)
	}
}

func TestUnknownChainExits1(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, _, stderr := runPublisher(t, "-chain", "nosuch", "-n", "2", "hello")
	if code != 1 || !strings.Contains(stderr, `is chain "nosuch" configured`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestInterruptedSummaryAgreesWithItself runs the publisher binary, sends
// it SIGINT once a few requests were answered, and reads its summary: the
// heading's "not sent" count is the table's (not sent) row, not counted as
// failed, and the REQUESTS column adds up to the run.
func TestInterruptedSummaryAgreesWithItself(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the publisher")
	}
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	bin := filepath.Join(t.TempDir(), "publisher")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "-n", "200", "-rate", "20", "-timeout", "20s", "hello")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for solo.Requests() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("exit %v; want 1 (requests not sent)", err)
	}
	out := stdout.String()
	heading := regexp.MustCompile(`(?m)^ok (\d+), degraded 0 \(0\.0% of ok\), failed 0, no result 0, not sent (\d+)$`).FindStringSubmatch(out)
	if heading == nil {
		t.Fatalf("no heading line")
	}
	ok, unsent := heading[1], heading[2]
	for _, want := range []string{
		`(?m)^solo +solo-model +` + ok + ` +` + ok + ` +` + ok + ` +0 \(0\.0%\) +0 `,
		`(?m)^\(not sent\) +- +` + unsent + ` +0 +0 +- +0 +- +-$`,
		`(?m)^TOTAL +200 +` + ok + ` +` + ok + ` +0 \(0\.0%\) +0 `,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("summary lacks %s", want)
		}
	}
	if !strings.Contains(stderr.String(), "stopped sending") {
		t.Errorf("stderr does not say sending stopped")
	}
}

// TestExamples: the example requests file and schema of docs/commands.md are read as
// written and sent.
func TestExamples(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, stdout, _ := runPublisher(t, "-f", "../../examples/requests.jsonl", "-schema", "../../examples/answer.schema.json", "-wait=false")
	if code != 0 || stdout != "published 4 request(s) to detour.requests.default\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

// TestAFullQueueRefusesThePublishSayingSo: when DETOUR_REQUESTS holds its
// DETOUR_REQUESTS_MAX_BYTES of requests waiting for processors, a publish is
// refused at once, not retried, and the publisher says why and exits 1.
func TestAFullQueueRefusesThePublishSayingSo(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 1000, ResultTTL: time.Hour,
		RequestsMaxBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{16 << 10, 1 << 10, 0} {
		filler := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
		for {
			if _, err := js.Publish(ctx, "detour.requests.default", filler); err != nil {
				break
			}
		}
	}
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	code, _, stderr := runPublisher(t, "-wait=false", "hello")
	if code != 1 || !strings.Contains(stderr, "DETOUR_REQUESTS is full: requests are refused until processors have answered some") ||
		strings.Contains(stderr, "retrying") {
		t.Fatalf("exit %d, stderr %q; want exit 1 saying the queue is full, without retrying", code, stderr)
	}
}
