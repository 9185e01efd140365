package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// dlqServer starts a server with the topology of chain "default", points
// the commands at it, and returns it with a dead-letter publisher.
func dlqServer(t *testing.T) (jetstream.JetStream, *deadletter.Publisher) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	err := topology.Ensure(context.Background(), js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second,
		MaxAckPending: 10, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	return js, deadletter.NewPublisher(js)
}

// TestDLQCommand runs `processor dlq` against a real server: list (table,
// filter, JSON), show, replay with a new deadline, purge, and usage errors.
func TestDLQCommand(t *testing.T) {
	js, pub := dlqServer(t)
	ctx := context.Background()
	sourceSeq := uint64(0)
	letter := func(reason deadletter.Reason, body string, cause string) string {
		t.Helper()
		sourceSeq++
		if err := pub.Publish(ctx, deadletter.Letter{Chain: "default", Reason: reason, Err: errors.New(cause), SourceSeq: sourceSeq, Deliveries: 1,
			Data: []byte(body), Header: nats.Header{"Content-Type": {"application/json"}}}); err != nil {
			t.Fatal(err)
		}
		s, _ := js.Stream(ctx, wire.DeadLetterStream)
		info, _ := s.Info(ctx)
		return strconv.FormatUint(info.State.LastSeq, 10)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	expired := letter(deadletter.ReasonExpired, `{"id":"late-1","deadline":"`+past+`","messages":[{"role":"user","content":"hi"}]}`, "deadline passed")
	letter(deadletter.ReasonPoison, `{"id":"rej-1","messages":[{"role":"user","content":"hi"}]}`, "HTTP 400")
	letter(deadletter.ReasonPoison, `{"id":"rej-2","messages":[{"role":"user","content":"hi"}]}`, "HTTP 422")

	dlq := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"dlq"}, args...), &out, &errOut); code != wantCode {
			t.Fatalf("dlq %v exited %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}

	out := dlq(0, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "SEQ TIME CHAIN REASON ID ERROR" {
		t.Fatalf("list:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != expired || f[2] != "default" || f[3] != "expired" || f[4] != "late-1" || f[5] != "deadline" {
		t.Fatalf("list row %q", lines[1])
	}

	out = dlq(0, "list", "-reason", "poison", "-json")
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e deadletter.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("list -json line %q: %v", l, err)
		}
		ids = append(ids, e.RequestID)
	}
	if strings.Join(ids, ",") != "rej-1,rej-2" {
		t.Fatalf("list -reason poison -json ids %v:\n%s", ids, out)
	}

	out = dlq(0, "show", expired)
	for _, want := range []string{"reason expired", "Detour-DLQ-Reason: expired", "Detour-DLQ-Error: deadline passed", "body (", "json):", `  "id": "late-1",`} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}

	out = dlq(1, "replay", expired)
	if !strings.Contains(out, "deadline has passed") || !strings.Contains(out, "-deadline") {
		t.Fatalf("replay of an expired request without -deadline:\n%s", out)
	}
	out = dlq(0, "replay", expired, "-deadline", "1h")
	if !strings.Contains(out, "replayed "+expired+": id late-1 to detour.requests.default") {
		t.Fatalf("replay:\n%s", out)
	}
	dlq(1, "show", expired) // gone

	dlq(2, "replay")              // nothing selected
	dlq(2, "replay", "-all", "3") // both
	dlq(2, "frobnicate")
	// A bad reason names the valid ones, and nothing else of the usage.
	golden := map[string][]string{
		"processor dlq list: unknown reason \"nonsense\"; the reasons are bad_request, bad_reply_subject, too_large, expired, poison, invalid_output\n" +
			"usage: processor dlq list [-reason R] [-chain C] [-json]\n": {"list", "-reason", "nonsense"},
		// A bare purge removed every dead letter without asking; it is
		// refused, like a bare replay.
		"processor dlq purge: name the dead letters to purge (SEQ..., or -reason/-chain), or purge every one with -all\n" +
			"usage: processor dlq purge [-reason R] [-chain C] (SEQ... | -all)\n": {"purge"},
		"processor dlq purge: name sequences or select with -all/-reason/-chain, not both\n" +
			"usage: processor dlq purge [-reason R] [-chain C] (SEQ... | -all)\n": {"purge", "-all", "2"},
	}
	for want, args := range golden {
		if out := dlq(2, args...); out != want {
			t.Errorf("dlq %v printed\n%s\nwant\n%s", args, out, want)
		}
	}

	if out = dlq(0, "purge", "-reason", "poison", "-chain", "default"); !strings.Contains(out, "purged 2 dead letter(s)") {
		t.Fatalf("purge: %s", out)
	}
	if out = dlq(0, "list"); !strings.Contains(out, "no dead letters") {
		t.Fatalf("list after purge: %s", out)
	}
	letter(deadletter.ReasonExpired, `{"id":"late-2","messages":[{"role":"user","content":"hi"}]}`, "deadline passed")
	letter(deadletter.ReasonPoison, `{"id":"rej-3","messages":[{"role":"user","content":"hi"}]}`, "HTTP 400")
	if out = dlq(0, "purge", "-all"); out != "purged 2 dead letter(s)\n" {
		t.Fatalf("purge -all: %q", out)
	}
	if out = dlq(0, "list"); !strings.Contains(out, "no dead letters") {
		t.Fatalf("list after purge -all: %s", out)
	}
}

func TestDLQDeadlineFlag(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	if got, err := deadletter.ParseDeadline("90m", now); err != nil || !got.Equal(now.Add(90*time.Minute)) {
		t.Fatalf("90m: %v %v", got, err)
	}
	if got, err := deadletter.ParseDeadline("2030-01-02T00:00:00Z", now); err != nil || got.Day() != 2 {
		t.Fatalf("RFC 3339: %v %v", got, err)
	}
	for _, bad := range []string{"-1h", "0s", "2029-01-01T00:00:00Z", "tomorrow"} {
		if _, err := deadletter.ParseDeadline(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestClientCommandUsageErrors: a usage error of a client command is found
// before it connects, says what is wrong and exits 2 (docs/commands.md),
// however the rest of the command line reads.
func TestClientCommandUsageErrors(t *testing.T) {
	t.Setenv("DETOUR_NATS_URL", "nats://127.0.0.1:1") // nothing listens: connecting would exit 1
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"status", "extra"}, `unexpected argument "extra"`},
		{[]string{"status", "-json", "extra", "args"}, `unexpected argument "extra"`},
		{[]string{"watch", "extra"}, `unexpected argument "extra"`},
		{[]string{"check", "-samples", "s.jsonl", "extra"}, `unexpected argument "extra"`},
		{[]string{"-version", "extra"}, `unknown command "extra"`},
		{[]string{"dlq", "replay", "1", "-deadline", "soon"}, `-deadline "soon" is neither a duration`},
		{[]string{"dlq", "replay", "-all", "-deadline", "-1h"}, "must be in the future"},
		{[]string{"dlq", "purge", "-chain", "a.b"}, `-chain "a.b" is not a chain name`},
		{[]string{"dlq", "list", "-chain", "*"}, `-chain "*" is not a chain name`},
	} {
		var out, errOut bytes.Buffer
		code := run(tt.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tt.says) || !strings.Contains(strings.ToLower(errOut.String()), "usage") {
			t.Errorf("processor %s: exit %d, stderr %q; want 2 saying %q and the usage", strings.Join(tt.args, " "), code, errOut.String(), tt.says)
		}
	}
}
