package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// operatorServer starts a server, points the client commands at it with a
// chain file of primary and backup, and returns it with its JetStream.
func operatorServer(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	writeFile(t, chainFile, "providers:\n  - {name: primary, type: openai, model: m1, api_key_env: DETOUR_TEST_UNSET_KEY}\n"+
		"  - {name: backup, type: openai, model: m2, failure_threshold: 0}\nchains:\n  default: [primary, backup]\n")
	t.Setenv("DETOUR_CONFIG", chainFile)
	return js
}

// processorStore is a processor's mirror of the bucket, following it.
func processorStore(t *testing.T, js jetstream.JetStream) *kvstate.Store {
	t.Helper()
	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: "proc-1"})
	kvstatetest.Follow(t, ctx, store)
	return store
}

// command runs the processor command args and checks its exit code.
func command(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != wantCode {
		t.Fatalf("processor %v exited %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestResetCommand: `processor reset primary` ends the hour-long cooldown
// a 401 opened, for a processor's mirror too, and says what it was; a
// second reset has nothing to reset and says so; a name the chain file
// does not define is refused with a suggestion, exit 2.
func TestResetCommand(t *testing.T) {
	js := operatorServer(t)
	out, _ := command(t, 0, "reset", "primary")
	if want := "primary: nothing to reset: bucket detour_providers does not exist yet (no processor has started on this NATS)\n"; out != want {
		t.Errorf("reset before any processor started: %q, want %q", out, want)
	}

	store := processorStore(t, js)
	err := store.RecordFailure(context.Background(), "primary", chain.Failure{Class: chain.ClassAuth, Error: "auth (HTTP 401): invalid key",
		At: time.Now(), CooldownFor: time.Hour, Policy: chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute, MaxCooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = command(t, 0, "reset", "primary", "backup")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^primary: reset: was open until \S+Z \(auth cooldown by proc-1\), 1 failures, 1 trips; now closed for every processor$`).MatchString(lines[0]) ||
		lines[1] != "backup: nothing to reset: closed, no cooldown, failures or trips recorded" {
		t.Fatalf("reset output:\n%s", out)
	}
	waitUntil(t, 5*time.Second, "the processor's mirror to see primary closed", func() bool {
		return store.State("primary", time.Now()) == kvstate.StateClosed
	})
	if h, _ := store.Health("primary"); !strings.Contains(h.ResetBy, "@") {
		t.Errorf("health %+v: reset_by should name the operator as user@host", h)
	}
	out, _ = command(t, 0, "status")
	if !regexp.MustCompile(`(?m)^primary +closed +0 +- +0 +-$`).MatchString(out) || !regexp.MustCompile(`(?m)^primary: reset by operator \S+@\S+ at \S+Z$`).MatchString(out) {
		t.Errorf("status after the reset:\n%s", out)
	}
	out, _ = command(t, 0, "reset", "primary")
	if out != "primary: nothing to reset: closed, no cooldown, failures or trips recorded\n" {
		t.Errorf("second reset: %q", out)
	}

	_, errOut := command(t, 2, "reset", "primray")
	if !strings.Contains(errOut, `processor reset: no provider named "primray" in `) || !strings.Contains(errOut, `(did you mean "primary"?)`) ||
		!strings.Contains(errOut, "usage: processor reset") {
		t.Errorf("unknown provider: %q", errOut)
	}
	if _, errOut := command(t, 2, "reset"); !strings.Contains(errOut, "name the providers to reset") {
		t.Errorf("reset without a provider: %q", errOut)
	}
	if _, errOut := command(t, 2, "reset", "-nope", "primary"); !strings.Contains(errOut, "flag provided but not defined: -nope") {
		t.Errorf("reset with an unknown flag: %q", errOut)
	}
	if out, _ := command(t, 0, "reset", "-help"); !strings.HasPrefix(out, "usage: processor reset") {
		t.Errorf("reset -help: %q", out)
	}
	if out, _ := command(t, 0, "-help"); !strings.Contains(out, "processor reset [-config FILE] PROVIDER…") ||
		!strings.Contains(out, "processor trip PROVIDER -for D -reason TEXT") {
		t.Errorf("processor -help lists no reset or trip:\n%s", out)
	}
	if _, errOut := command(t, 78, "reset", "-config", filepath.Join(t.TempDir(), "missing.yaml"), "primary"); !strings.Contains(errOut, "-config FILE or DETOUR_CONFIG") {
		t.Errorf("reset without a chain file: %q", errOut)
	}
}

// TestTripCommand: `processor trip primary -for 30s -reason maintenance`
// opens the operator's cooldown that a processor's mirror honours, and
// status and watch -json show the operator and the reason; a trip shorter
// than a running cooldown leaves it; bad -for, -reason and names are
// refused with exit 2, a trip without a bucket with exit 1.
func TestTripCommand(t *testing.T) {
	js := operatorServer(t)
	if _, errOut := command(t, 1, "trip", "primary", "-for", "30s", "-reason", "maintenance"); !strings.Contains(errOut, "does not exist yet: no processor has started") {
		t.Errorf("trip without a bucket: %q", errOut)
	}
	store := processorStore(t, js)

	out, _ := command(t, 0, "trip", "primary", "-for", "30s", "-reason", "maintenance")
	if !regexp.MustCompile(`^primary: tripped by \S+@\S+ for 30s, until \S+Z: maintenance; every processor skips it until then, then sends it one request as a probe \(half-open\)\n$`).MatchString(out) {
		t.Fatalf("trip output %q", out)
	}
	waitUntil(t, 5*time.Second, "the processor's mirror to skip primary", func() bool {
		return !store.Admit(context.Background(), "primary", time.Now(), time.Second).Allowed
	})
	rows := store.Status(time.Now(), "primary")
	c := rows[0].Cooldown
	if c == nil || !c.Operator || c.Reason != "maintenance" || !strings.Contains(c.By, "@") || c.DurationS != 30 {
		t.Fatalf("cooldown %+v, want the operator's", c)
	}

	out, _ = command(t, 0, "status")
	if !regexp.MustCompile(`(?m)^primary +open +0 +\S+ +0 +-$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^primary: tripped by operator \S+@\S+ until \S+Z: maintenance$`).MatchString(out) {
		t.Errorf("status after the trip:\n%s", out)
	}
	out, _ = command(t, 0, "status", "-json")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[1].Provider != "primary" || rows[1].Cooldown == nil || !rows[1].Cooldown.Operator || rows[1].Cooldown.Reason != "maintenance" {
		t.Errorf("status -json rows %+v", rows)
	}

	// Shorter than the running cooldown: left as it is.
	out, _ = command(t, 0, "trip", "primary", "-for", "10s", "-reason", "again")
	if !strings.Contains(out, "primary: already cooling until ") || !strings.Contains(out, "no sooner than the 10s asked: left as it is (processor reset primary ends it)") ||
		!strings.Contains(out, ": maintenance)") {
		t.Errorf("a shorter trip: %q", out)
	}
	// A provider with no circuit of its own comes back closed.
	if out, _ := command(t, 0, "trip", "-for", "1s", "-reason", "x", "backup"); !strings.Contains(out, "then calls it again (its failure_threshold is 0") {
		t.Errorf("trip of backup: %q", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"primary", "-for", "1.5s", "-reason", "x"}, "-for 1.5s: a cooldown is whole seconds, at least 1s"},
		{[]string{"primary", "-for", "500ms", "-reason", "x"}, "-for 500ms: a cooldown is whole seconds, at least 1s"},
		{[]string{"primary", "-reason", "x"}, "-for 0s: a cooldown is whole seconds, at least 1s"},
		{[]string{"primary", "-for", "-5s", "-reason", "x"}, "-for -5s: a cooldown is whole seconds"},
		{[]string{"primary", "-for", "soon", "-reason", "x"}, `invalid value "soon" for flag -for`},
		{[]string{"primary", "-for", "2h", "-reason", "x"}, "-for 2h0m0s is longer than primary's longest cooldown in "},
		{[]string{"primary", "-for", "30s"}, "-reason is required"},
		{[]string{"primary", "-for", "30s", "-reason", strings.Repeat("x", 301)}, "-reason is 301 bytes, at most 300"},
		{[]string{"primray", "-for", "30s", "-reason", "x"}, `no provider named "primray"`},
		{[]string{"-for", "30s", "-reason", "x"}, "name one provider to trip"},
		{[]string{"primary", "backup", "-for", "30s", "-reason", "x"}, "name one provider to trip"},
	} {
		_, errOut := command(t, 2, append([]string{"trip"}, tc.args...)...)
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "usage: processor trip") {
			t.Errorf("trip %v: stderr %q, want %q and the usage", tc.args, errOut, tc.want)
		}
	}
	if out, _ := command(t, 0, "trip", "-help"); !strings.HasPrefix(out, "usage: processor trip") {
		t.Errorf("trip -help: %q", out)
	}
}

// TestWatchShowsTheOperatorsActs: `processor watch` prints an operator's
// trip as opened by the operator, with the reason, and a reset as one
// reset line naming the operator; -json carries the same.
func TestWatchShowsTheOperatorsActs(t *testing.T) {
	js := operatorServer(t)
	processorStore(t, js)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var text, textErr, asJSON, jsonErr syncBuffer
	done := make(chan int, 2)
	go func() { done <- watch(ctx, "", false, &text, &textErr) }()
	go func() { done <- watch(ctx, "", true, &asJSON, &jsonErr) }()
	waitUntil(t, 10*time.Second, "both watches to start", func() bool {
		return strings.Count(text.String(), " state ") == 2 && strings.Count(asJSON.String(), `"event":"state"`) == 2
	})
	command(t, 0, "trip", "primary", "-for", "1h", "-reason", "vendor maintenance")
	command(t, 0, "reset", "primary")
	waitUntil(t, 10*time.Second, "the reset line", func() bool {
		return strings.Contains(text.String(), " reset ") && strings.Contains(asJSON.String(), `"event":"reset"`)
	})
	if !regexp.MustCompile(`(?m) primary +opened +until \S+Z \(3600s, by operator \S+@\S+\): vendor maintenance$`).MatchString(text.String()) ||
		!regexp.MustCompile(`(?m) primary +reset +by \S+@\S+$`).MatchString(text.String()) {
		t.Errorf("watch:\n%s", text.String())
	}
	var events []kvstate.Event
	for _, line := range strings.Split(strings.TrimSpace(asJSON.String()), "\n") {
		var e kvstate.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("watch -json line %q: %v", line, err)
		}
		if e.Kind != kvstate.EventState {
			events = append(events, e)
		}
	}
	if len(events) != 2 || events[0].Kind != kvstate.EventOpened || events[0].Cooldown == nil || !events[0].Cooldown.Operator ||
		events[0].Cooldown.Reason != "vendor maintenance" || events[1].Kind != kvstate.EventReset || !strings.Contains(events[1].By, "@") {
		t.Errorf("watch -json events %+v", events)
	}
	cancel()
	for range 2 {
		if code := <-done; code != 0 {
			t.Errorf("watch exited %d: %s %s", code, textErr.String(), jsonErr.String())
		}
	}
}

// besideADemo starts a NATS server for the client commands, with no chain
// file named or at hand, and returns a store on the bucket a processor
// creates.
func besideADemo(t *testing.T) *kvstate.Store {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	t.Setenv("DETOUR_CONFIG", "")
	os.Unsetenv("DETOUR_CONFIG") // restored by t.Setenv's cleanup
	t.Chdir(t.TempDir())
	return processorStore(t, js)
}

// recordRunning records in the bucket, as processor running chainFile
// does.
func recordRunning(t *testing.T, store *kvstate.Store, processor, chainFile string) {
	t.Helper()
	file, err := config.Parse([]byte(chainFile), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Record(context.Background(), processor, fleet.Record(processor, file), time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorCommandsBesideADemo: with no chain file named and no
// detour.yaml at hand (beside `processor -demo`), reset and trip take the
// providers and their longest cooldowns from the running processors'
// announcements, and status lists those providers; with none running, the
// missing chain file is exit 78.
func TestOperatorCommandsBesideADemo(t *testing.T) {
	store := besideADemo(t)

	_, errOut := command(t, 78, "reset", "primary")
	if !strings.Contains(errOut, "no chain file detour.yaml here, and no running processor answered") || !strings.Contains(errOut, "-config FILE") {
		t.Errorf("with no processor running: %q, want the missing chain file and processor named, and what to do", errOut)
	}

	recordRunning(t, store, "proc-1", "providers:\n  - {name: primary, type: openai, model: m1, max_cooldown: 20m, auth_cooldown: 1h}\n"+
		"  - {name: template, type: rules, default_reply: later}\nchains:\n  default: [primary, template]\n")

	// status lists them too, with or without recorded state.
	if out, _ := command(t, 0, "status"); !strings.Contains(out, "template  closed") {
		t.Errorf("status beside the processors:\n%s\nwant every provider they announce, template among them", out)
	}
	out, _ := command(t, 0, "trip", "primary", "-for", "30s", "-reason", "maintenance")
	if !strings.HasPrefix(out, "primary: tripped by ") {
		t.Errorf("trip: %q", out)
	}
	if _, errOut := command(t, 2, "trip", "primary", "-for", "2h", "-reason", "maintenance"); !strings.Contains(errOut, "1h0m0s") {
		t.Errorf("a trip past the longest cooldown: %q, want the announced limit, 1h0m0s", errOut)
	}
	if _, errOut := command(t, 2, "reset", "primray"); !strings.Contains(errOut, `did you mean "primary"?`) {
		t.Errorf("an unknown provider: %q, want a suggestion", errOut)
	}
	if out, _ := command(t, 0, "reset", "primary"); !strings.Contains(out, "primary: reset: was open") {
		t.Errorf("reset: %q", out)
	}
}
