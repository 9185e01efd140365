package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/text/texttest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// The texts below are what a hostile provider, client or NATS user can
// plant: a screen clear, a window title, a clipboard write (OSC 52),
// hidden text, a carriage return that overwrites the line, and a line feed
// that forges a line of its own. The tests check that the commands print
// each as escapes, and that no line of their output holds a character a
// terminal would act on.
const (
	plantedName  = "x\x1b[2J\x1b]0;owned\a"
	plantedError = "fine\x1b[8m hidden \x1b[0m\r\x1b[Kforged\nFORGED LINE"
	plantedOSC52 = "r\x1b]52;c;cHduZWQ=\a\nFORGED LINE"
)

// assertVisible fails when a line of out holds anything a terminal would
// act on, or a planted line feed forged a line of its own.
func assertVisible(t *testing.T, what, out string) {
	t.Helper()
	if line, found := texttest.RawLine(out); found {
		t.Fatalf("%s prints a raw control character in %q; output:\n%s", what, line, out)
	}
	if strings.Contains(out, "\nFORGED LINE") {
		t.Fatalf("%s prints a planted line feed raw:\n%s", what, out)
	}
}

// plantProviderState writes, as any client with access to the bucket can,
// a health whose provider name and last error hold terminal controls, and
// a cooldown whose reason and prober do.
func plantProviderState(t *testing.T, nc *nats.Conn) {
	t.Helper()
	health, _ := json.Marshal(map[string]any{"consecutive_failures": 1, "trips": 0, "last_error": plantedError})
	cooldown, _ := json.Marshal(map[string]any{"until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "class": "server",
		"reason": plantedOSC52, "trip": 1, "duration_s": 5, "by": "b\x1b[31m"})
	for subject, data := range map[string][]byte{
		"$KV." + kvstate.Bucket + "." + plantedName + ".health": health,
		"$KV." + kvstate.Bucket + ".evil.cooldown":              cooldown,
	} {
		if _, err := nc.Request(subject, data, 5*time.Second); err != nil { // the stream's ack
			t.Fatal(err)
		}
	}
}

// forgeRecords writes in the bucket the records of two processors that
// define "primary" differently, with terminal controls in their ids and
// definitions, as a hand could.
func forgeRecords(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []fleet.Definition{
		{Fingerprint: "0000000000000000", Type: "openai", BaseURL: "http://evil\x1b[31m m\x1b[5m p\r\x1b[Kforged", Model: "m\nFORGED LINE", Policy: "p\u202eevil"},
		{Fingerprint: "1111111111111111", Type: "openai", BaseURL: "http://good/v1", Model: "m", Policy: "timeout=30s"},
	} {
		id := "forged-" + strconv.Itoa(i) + "\x1b]0;pwned\a\x1b[2J"
		record, _ := json.Marshal(fleet.Instance{Processor: id, Providers: map[string]fleet.Definition{"primary": d}})
		if _, err := kv.Put(t.Context(), kvstate.RunningKey(id), record); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusShowsOutsideTextAsEscapes: `processor status` prints provider
// names and errors from the bucket, and forged processor records in its
// CONFLICT block, as escapes.
func TestStatusShowsOutsideTextAsEscapes(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	t.Setenv("DETOUR_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	if _, err := kvstate.OpenBucket(t.Context(), js, 1); err != nil {
		t.Fatal(err)
	}
	plantProviderState(t, nc)
	forgeRecords(t, js)

	var out, errOut bytes.Buffer
	if code := run([]string{"status"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errOut.String())
	}
	assertVisible(t, "status", out.String())
	for _, want := range []string{
		`x\x1b[2J\x1b]0;owned\a`,
		`fine\x1b[8m hidden \x1b[0m\r\x1b[Kforged\nFORGED LINE`,
		`CONFLICT: provider primary`,
		`http://evil\x1b[31m m\x1b[5m p\r\x1b[Kforged m\nFORGED LINE p\u202eevil  on [forged-0\x1b]0;pwned\a\x1b[2J]`,
		`on [forged-1\x1b]0;pwned\a\x1b[2J]`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %s:\n%s", want, out.String())
		}
	}
}

// TestWatchShowsOutsideTextAsEscapes: `processor watch` prints a provider
// name and last error from the bucket, and a cooldown's reason, as escapes,
// each event on one line.
func TestWatchShowsOutsideTextAsEscapes(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := kvstate.OpenBucket(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	writeFile(t, chainFile, "providers:\n  - {name: primary, type: openai, model: m1}\nchains:\n  default: [primary]\n")
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- watch(ctx, chainFile, false, &out, &errOut) }()
	// The state lines come once the bucket is read: what is written after
	// them is reported as events.
	waitUntil(t, 10*time.Second, "the state of primary", func() bool { return strings.Contains(out.String(), " state ") })
	plantProviderState(t, nc)
	waitUntil(t, 10*time.Second, "the opened event", func() bool { return strings.Contains(out.String(), " opened ") })
	cancel()
	<-done
	assertVisible(t, "watch", out.String())
	if want := `until 2`; !strings.Contains(out.String(), want) {
		t.Errorf("watch lacks %s:\n%s", want, out.String())
	}
	if want := `(5s, trip 1, server): r\x1b]52;c;cHduZWQ=\a\nFORGED LINE`; !strings.Contains(out.String(), want) {
		t.Errorf("watch lacks %s:\n%s", want, out.String())
	}
}

// TestDLQShowsOutsideTextAsEscapes: `processor dlq list`, `show` and
// `replay` print a client's request id and header and a provider's error
// as escapes; list keeps one row per dead letter.
func TestDLQShowsOutsideTextAsEscapes(t *testing.T) {
	js, pub := dlqServer(t)
	ctx := context.Background()
	sourceSeq := uint64(0)
	letter := func(id string, cause string) string {
		t.Helper()
		sourceSeq++
		body, _ := json.Marshal(map[string]any{"id": id, "messages": []map[string]string{{"role": "user", "content": "hi"}}})
		err := pub.Publish(ctx, deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, Err: errors.New(cause), SourceSeq: sourceSeq, Deliveries: 1,
			Data: body, Header: nats.Header{"Content-Type": {"application/json"}, "X-Trace": {"t\x1b]0;pwned-title\a\x1b[2J"}}})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := js.Stream(ctx, wire.DeadLetterStream)
		info, _ := s.Info(ctx)
		return strconv.FormatUint(info.State.LastSeq, 10)
	}
	forged := letter("x\x1b]0;pwned\a\x1b[2J\n999  2026-01-01T00:00:00Z  default  poison  FORGED-ROW",
		"request (HTTP 400): bad input \x1b]0;pwned-by-provider\a\x1b[2J done")
	replayable := letter("r\x1b[2J", "HTTP 400")

	dlq := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"dlq"}, args...), &out, &errOut); code != 0 {
			t.Fatalf("dlq %v exited %d\nstdout: %s\nstderr: %s", args, code, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	out := dlq("list")
	assertVisible(t, "dlq list", out)
	if n := strings.Count(out, "\n"); n != 3 || strings.Contains(out, "\n999") {
		t.Fatalf("dlq list: %d lines, want the heading and two rows:\n%s", n, out)
	}
	if want := `x\x1b]0;pwned\a\x1b[2J\n999`; !strings.Contains(out, want) {
		t.Errorf("dlq list lacks %s:\n%s", want, out)
	}

	out = dlq("show", forged)
	assertVisible(t, "dlq show", out)
	for _, want := range []string{
		`id x\x1b]0;pwned\a\x1b[2J\n999  2026-01-01T00:00:00Z  default  poison  FORGED-ROW, stored`,
		`Detour-DLQ-Error: request (HTTP 400): bad input \x1b]0;pwned-by-provider\a\x1b[2J done`,
		`X-Trace: t\x1b]0;pwned-title\a\x1b[2J`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %s:\n%s", want, out)
		}
	}

	out = dlq("replay", replayable)
	assertVisible(t, "dlq replay", out)
	if want := `replayed ` + replayable + `: id r\x1b[2J to detour.requests.default`; !strings.Contains(out, want) {
		t.Errorf("dlq replay lacks %s:\n%s", want, out)
	}
}

// TestCacheStatsShowsChainNamesAsEscapes: `processor cache stats` prints a
// chain name planted in the cache bucket as escapes.
func TestCacheStatsShowsChainNamesAsEscapes(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	if _, err := cache.Open(t.Context(), js, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("$KV."+cache.Bucket+"."+plantedName+".shared.a", []byte("{}"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"cache", "stats"}, &out, &errOut); code != 0 {
		t.Fatalf("cache stats: exit %d, stderr %q", code, errOut.String())
	}
	assertVisible(t, "cache stats", out.String())
	if want := `x\x1b[2J\x1b]0;owned\a  1`; !strings.Contains(out.String(), want) {
		t.Errorf("cache stats lacks %s:\n%s", want, out.String())
	}
}

// TestCheckShowsProviderErrorsAsEscapes: `processor check` prints a
// provider's error holding terminal controls as escapes.
func TestCheckShowsProviderErrorsAsEscapes(t *testing.T) {
	bad := providertest.New(providertest.OpenAI, func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Status: 400, ErrorMessage: "bad input \x1b]0;pwned\a\x1b[2J done"}
	})
	defer bad.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "detour.yaml")
	writeFile(t, cfg, "providers:\n  - {name: bad, type: openai, base_url: "+bad.URL+", model: m}\nchains:\n  default: [bad]\n")
	samples := filepath.Join(dir, "samples.jsonl")
	writeFile(t, samples, `{"messages":[{"role":"user","content":"hello"}]}`+"\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "-samples", samples, "-config", cfg}, &out, &errOut); code != 1 {
		t.Fatalf("check: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	assertVisible(t, "check", out.String())
	if want := `bad input \x1b]0;pwned\a\x1b[2J done`; !strings.Contains(out.String(), want) {
		t.Errorf("check lacks %s:\n%s", want, out.String())
	}
}
