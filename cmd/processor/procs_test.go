package main

// Helpers for the acceptance tests that run the processor binary as OS
// processes against a NATS server owned by the test, so the server, its
// streams and the fake provider outlive any processor the test kills or stops.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/wire"
)

// testChain is the one chain the process tests configure.
const testChain = "default"

// buildProcessor builds the processor binary into a temp dir and returns its
// path.
func buildProcessor(t *testing.T) string {
	t.Helper()
	return buildCommand(t, "processor")
}

// buildCommand builds ./cmd/<name> into a temp dir of t and returns the
// binary's path. The build cache makes every build after the first cheap.
func buildCommand(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goTool, "build", "-o", bin, "../"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

// writeChainFile writes a one-provider chain file pointing at baseURL. Each
// processor of a test gets its own model name, so the fake provider's
// Received list tells which process made each call.
func writeChainFile(t *testing.T, baseURL, model string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "detour.yaml")
	yaml := fmt.Sprintf(`providers:
  - {name: primary, type: openai, base_url: %s, model: %s, timeout: 10s, max_retries: 0}
chains:
  %s: [primary]
`, baseURL, model, testChain)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// processorEnv is the environment of a processor process: the caller's
// environment without its DETOUR_* variables, then the test's settings.
func processorEnv(t *testing.T, natsURL, chainFile string, settings ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DETOUR_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"DETOUR_NATS_URL="+natsURL,
		"DETOUR_METRICS_ADDR=",
		"DETOUR_CONFIG="+chainFile,
		"DETOUR_DATA_DIR="+t.TempDir(),
	)
	return append(env, settings...)
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

// process is one processor running as an OS process.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's error, set before done is closed
	at   time.Time     // when Wait returned, set before done is closed
}

// startProcess starts the processor binary; a process still running when
// the test ends is killed, and its output is logged if the test failed.
func startProcess(t *testing.T, bin, name string, env []string) *process {
	t.Helper()
	return startProcessArgs(t, bin, name, env)
}

// startProcessArgs is startProcess with command-line arguments.
func startProcessArgs(t *testing.T, bin, name string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = env, t.TempDir(), p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting processor %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.err, p.at = err, time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("processor %s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// signal sends sig to the process.
func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling processor %s: %v", p.name, err)
	}
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to exit and returns Wait's error;
// it fails the test if the process is still running then.
func (p *process) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("processor %s still running after %s", p.name, timeout)
		return nil
	}
}

// exitCode waits up to d for the process to exit and returns its exit code;
// exited is false if it is still running.
func (p *process) exitCode(d time.Duration) (code int, exited bool) {
	select {
	case <-p.done:
	case <-time.After(d):
		return 0, false
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(p.err, &exitErr):
		return exitErr.ExitCode(), true
	case p.err != nil:
		return -1, true
	}
	return 0, true
}

// stop sends SIGTERM and expects a clean exit within timeout.
func (p *process) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	if p.exited() {
		t.Fatalf("processor %s exited early: %v", p.name, p.err)
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, timeout); err != nil {
		t.Fatalf("processor %s exited with %v after SIGTERM", p.name, err)
	}
}

// waitUntil polls cond every 5 ms until it holds or timeout passes. Any
// process in watch that exits meanwhile fails the test at once.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool, watch ...*process) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		for _, p := range watch {
			if p.exited() {
				t.Fatalf("processor %s exited (%v) while waiting for %s", p.name, p.err, what)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitConsuming waits until each process has logged that it is consuming.
func waitConsuming(t *testing.T, procs ...*process) {
	t.Helper()
	for _, p := range procs {
		waitUntil(t, 30*time.Second, "processor "+p.name+" to start consuming", func() bool {
			return strings.Contains(p.out.String(), "msg=processing")
		}, p)
	}
}

// requestID is the id of the i-th request of a test.
func requestID(i int) string { return fmt.Sprintf("r%d", i) }

// prompt is the text of request id; the fake provider receives it, so a
// call can be traced back to its request.
func prompt(id string) string { return "request " + id }

// publishRequest publishes one JSON request with a Nats-Msg-Id and returns
// the time its PubAck arrived, an upper bound of the time the stream stored it.
func publishRequest(ctx context.Context, js jetstream.JetStream, id string) (time.Time, error) {
	data, err := json.Marshal(wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: prompt(id)}}})
	if err != nil {
		return time.Time{}, err
	}
	msg := nats.NewMsg(wire.RequestSubject(testChain))
	msg.Data = data
	msg.Header.Set(nats.MsgIdHdr, id)
	msg.Header.Set("Content-Type", "application/json")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return time.Time{}, fmt.Errorf("publishing %s: %w", id, err)
	}
	return time.Now(), nil
}

// storedResults is the number of distinct subjects in DETOUR_RESULTS.
func storedResults(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	s, err := js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.NumSubjects)
}

// resultsPerSubject counts the messages of DETOUR_RESULTS per subject.
func resultsPerSubject(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(wire.ResultsPrefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// storedResult is one message of DETOUR_RESULTS, decoded.
type storedResult struct {
	chain.Result
	subject string
	stored  time.Time
}

// readResults returns every message of DETOUR_RESULTS, in stream order.
func readResults(t *testing.T, js jetstream.JetStream) []storedResult {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedResult
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			t.Fatalf("result at seq %d on %s: %v", seq, m.Subject, err)
		}
		out = append(out, storedResult{Result: res, subject: m.Subject, stored: m.Time})
	}
	return out
}

// checkExactlyOneOKResult asserts that DETOUR_RESULTS holds exactly one
// message per id, on no other subject, each an ok answer to its own prompt,
// and returns the results by id.
func checkExactlyOneOKResult(t *testing.T, js jetstream.JetStream, n int) map[string]storedResult {
	t.Helper()
	perSubject := resultsPerSubject(t, js)
	for i := range n {
		subject := wire.ResultSubject(requestID(i))
		if got := perSubject[subject]; got != 1 {
			t.Errorf("%s holds %d results, want exactly 1", subject, got)
		}
		delete(perSubject, subject)
	}
	for subject, count := range perSubject {
		t.Errorf("unexpected subject %s in %s (%d messages)", subject, wire.ResultsStream, count)
	}
	byID := map[string]storedResult{}
	for _, r := range readResults(t, js) {
		if _, dup := byID[r.ID]; dup {
			t.Errorf("second result for %s", r.ID)
		}
		byID[r.ID] = r
		if r.subject != wire.ResultSubject(r.ID) || r.Status != chain.StatusOK ||
			!strings.HasSuffix(r.Content, " answers: "+prompt(r.ID)) {
			t.Errorf("result on %s: id %q status %q content %q error %q", r.subject, r.ID, r.Status, r.Content, r.Error)
		}
	}
	if len(byID) != n {
		t.Errorf("%d distinct results read, want %d", len(byID), n)
	}
	return byID
}

// callsByModel counts the provider calls per request id and model (that is,
// per processor), from the prompts the fake received.
func callsByModel(t *testing.T, fake *providertest.Server) map[string]map[string]int {
	t.Helper()
	calls := map[string]map[string]int{}
	for _, req := range fake.Received() {
		if len(req.Messages) == 0 {
			t.Fatalf("the provider received a request without messages: %+v", req)
		}
		id, ok := strings.CutPrefix(req.Messages[len(req.Messages)-1].Content, "request ")
		if !ok {
			t.Fatalf("the provider received an unknown prompt %q", req.Messages[len(req.Messages)-1].Content)
		}
		if calls[id] == nil {
			calls[id] = map[string]int{}
		}
		calls[id][req.Model]++
	}
	return calls
}

// waitRequestsSettled waits until the chain's consumer has nothing pending
// or unacknowledged and the work-queue stream is empty: every request was
// acknowledged, none is left for a later redelivery.
func waitRequestsSettled(t *testing.T, js jetstream.JetStream, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	var last string
	deadline := time.Now().Add(timeout)
	for {
		cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(testChain))
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, wire.RequestsStream)
		if err != nil {
			t.Fatal(err)
		}
		si, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.NumRedelivered == 0 && si.State.Msgs == 0 {
			return
		}
		last = fmt.Sprintf("consumer pending %d, ack pending %d, redelivered %d; stream holds %d",
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, si.State.Msgs)
		if time.Now().After(deadline) {
			t.Fatalf("requests not settled after %s: %s", timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllResults waits until DETOUR_RESULTS holds a result for each of the
// n requests; on timeout it fails naming the requests without one and the
// state of the chain's consumer.
func waitAllResults(t *testing.T, js jetstream.JetStream, n int, timeout time.Duration, watch ...*process) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for storedResults(t, js) < n {
		for _, p := range watch {
			if p.exited() {
				t.Fatalf("processor %s exited (%v) while waiting for results", p.name, p.err)
			}
		}
		if time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		perSubject := resultsPerSubject(t, js)
		var missing []string
		for i := range n {
			if perSubject[wire.ResultSubject(requestID(i))] == 0 {
				missing = append(missing, requestID(i))
			}
		}
		state := "unknown"
		if cons, err := js.Consumer(context.Background(), wire.RequestsStream, wire.ConsumerName(testChain)); err == nil {
			if ci, err := cons.Info(context.Background()); err == nil {
				state = fmt.Sprintf("pending %d, ack pending %d, redelivered %d, waiting pulls %d",
					ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting)
			}
		}
		t.Fatalf("after %s, %d requests have no result: %v; consumer: %s", timeout, len(missing), missing, state)
	}
}
