package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/wire"
)

// unsetDetourEnv leaves every DETOUR_* variable unset for the test (and
// restores them after), so that the host's settings cannot change the
// messages checked here.
func unsetDetourEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"DETOUR_NATS_URL", "DETOUR_NATS_CREDS", "DETOUR_NATS_TLS_CA", "DETOUR_NATS_TLS_CERT",
		"DETOUR_NATS_TLS_KEY", "DETOUR_NATS_PING_INTERVAL", "DETOUR_NATS_MAX_PINGS_OUT", "DETOUR_LISTEN", "DETOUR_DATA_DIR", "DETOUR_CONFIG", "DETOUR_WORKERS", "DETOUR_REPLICAS",
		"DETOUR_ACK_WAIT", "DETOUR_MAX_ACK_PENDING", "DETOUR_REQUEST_TTL", "DETOUR_RESULT_TTL", "DETOUR_REPLY_PREFIXES",
		"DETOUR_MAX_PAYLOAD", "DETOUR_REQUESTS_MAX_BYTES", "DETOUR_RESULTS_MAX_BYTES", "DETOUR_DEADLETTER_MAX_BYTES", "DETOUR_METRICS_ADDR", "DETOUR_LOG_LEVEL", "DETOUR_LOG_FORMAT", "DETOUR_SHUTDOWN_TIMEOUT",
		"DETOUR_MAX_INVALID_DELIVERIES"} {
		t.Setenv(k, "")
		unsetenv(t, k)
	}
}

const badChainFile = `providers:
  - name: primary
    type: openai
    modle: gpt-4o
    timeout: soon
  - name: economy
    type: openai
    model: m
chains:
  default: [primary, econmy]
extra: 1
`

// TestBadSettingsExit78: every command that reads the DETOUR_* settings
// stops with exit code 78 and names each bad variable, one a line.
func TestBadSettingsExit78(t *testing.T) {
	unsetDetourEnv(t)
	t.Setenv("DETOUR_WORKERS", "abc")
	t.Setenv("DETOUR_REPLICAS", "9")
	const problems = "2 settings refused:\n" +
		"  DETOUR_WORKERS: \"abc\" is not a whole number\n" +
		"  DETOUR_REPLICAS: must be between 1 and 5\n"
	for _, tt := range []struct {
		args   []string
		prefix string
	}{
		{nil, "processor: "},
		{[]string{"run"}, "processor: "},
		{[]string{"status"}, "processor status: "},
		{[]string{"watch"}, "processor watch: "},
		{[]string{"dlq", "list"}, "processor dlq: "},
	} {
		var out, errOut bytes.Buffer
		// status first warns that it found no chain file; the settings come after.
		if code := run(tt.args, &out, &errOut); code != config.ExitConfig || !strings.HasSuffix(errOut.String(), tt.prefix+problems) {
			t.Errorf("processor %v: exit %d, stderr:\n%s\nwant exit 78 and:\n%s", tt.args, code, errOut.String(), tt.prefix+problems)
		}
	}
}

// TestReplyPrefixesThatLoopExit78: a reply prefix that covers a subject
// detour consumes or serves would let a request make the processor publish
// its result there: to detour.ask.<chain> the result is queued again as a
// request, whose failed result then replaces the good one. Every such
// prefix, and every one that covers them, stops the processor with exit
// code 78 naming DETOUR_REPLY_PREFIXES, before it connects anywhere.
func TestReplyPrefixesThatLoopExit78(t *testing.T) {
	for _, prefix := range []string{
		wire.AskPrefix, wire.AskSubject("default") + ".", wire.RequestsPrefix, wire.DeadLetterPrefix,
		"detour.", "$JS.", "$KV.", "$SRV.", "$SYS.", ">.", "detour.>.",
	} {
		unsetDetourEnv(t)
		t.Setenv("DETOUR_REPLY_PREFIXES", "_INBOX.,"+prefix)
		var out, errOut bytes.Buffer
		if code := run([]string{"run"}, &out, &errOut); code != config.ExitConfig || !strings.Contains(errOut.String(), "DETOUR_REPLY_PREFIXES: prefix 2 ") {
			t.Errorf("DETOUR_REPLY_PREFIXES=_INBOX.,%s: exit %d, stderr:\n%s\nwant exit 78 naming the prefix", prefix, code, errOut.String())
		}
	}
}

// TestBadChainFileExit78: a refused chain file stops `processor` and
// `processor check` with exit code 78, every problem on a line of its own.
func TestBadChainFileExit78(t *testing.T) {
	unsetDetourEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "detour.yaml")
	writeFile(t, cfg, badChainFile)
	samples := filepath.Join(dir, "samples.jsonl")
	writeFile(t, samples, `{"prompt":"hi"}`+"\n")
	want := "chain file " + cfg + " has 4 problems:\n" +
		"  line 4: providers[0] \"primary\": unknown key \"modle\"; did you mean \"model\"?\n" +
		"  line 5: providers[0] \"primary\": timeout: must be a duration such as 500ms, 30s or 10m (got \"soon\")\n" +
		"  line 10: chains.default[1]: unknown provider \"econmy\"; did you mean \"economy\"?\n" +
		"  line 11: unknown key \"extra\"\n" +
		"  keys of the file: providers, chains\n"
	for _, tt := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"-config", cfg}, "processor: "},
		{[]string{"check", "-samples", samples, "-config", cfg}, "processor check: "},
	} {
		var out, errOut bytes.Buffer
		if code := run(tt.args, &out, &errOut); code != config.ExitConfig || errOut.String() != tt.prefix+want {
			t.Errorf("processor %v: exit %d, stderr:\n%s\nwant exit 78 and:\n%s", tt.args, code, errOut.String(), tt.prefix+want)
		}
	}

	missing := filepath.Join(dir, "none.yaml")
	for _, args := range [][]string{{"-config", missing}, {"check", "-samples", samples, "-config", missing}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != config.ExitConfig || !strings.Contains(errOut.String(), "no such file") {
			t.Errorf("processor %v: exit %d, stderr %q; want 78 naming the missing file", args, code, errOut.String())
		}
	}
}

// TestBadChainFileJSONLog: with DETOUR_LOG_FORMAT=json the problems are one
// log record holding them as a list, so that the log stays JSON.
func TestBadChainFileJSONLog(t *testing.T) {
	unsetDetourEnv(t)
	t.Setenv("DETOUR_LOG_FORMAT", "json")
	cfg := filepath.Join(t.TempDir(), "detour.yaml")
	writeFile(t, cfg, badChainFile)
	var out, errOut bytes.Buffer
	if code := run([]string{"-config", cfg}, &out, &errOut); code != config.ExitConfig {
		t.Fatalf("exit %d, want 78\n%s", code, errOut.String())
	}
	var rec struct {
		Level, Msg, Path string
		Problems         []string
	}
	if err := json.Unmarshal(errOut.Bytes(), &rec); err != nil || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("stderr is not one JSON record (%v):\n%s", err, errOut.String())
	}
	if rec.Level != "ERROR" || rec.Msg != "chain file refused" || rec.Path != cfg || len(rec.Problems) != 5 ||
		rec.Problems[0] != `line 4: providers[0] "primary": unknown key "modle"; did you mean "model"?` {
		t.Errorf("record %+v", rec)
	}
}

// unsetenv unsets k; t.Setenv before it restores k's value after the test.
func unsetenv(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}
