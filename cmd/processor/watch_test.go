package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// TestWatchPrintsStateThenARecoveryInOrder: `processor watch` starts with
// the state of every provider (primary open, backup from the chain file
// closed), then prints one recovery as it happened: expired, probe,
// closed, each once.
func TestWatchPrintsStateThenARecoveryInOrder(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	writeFile(t, chainFile, "providers:\n  - {name: primary, type: openai, model: m1}\n  - {name: backup, type: openai, model: m2}\nchains:\n  default: [primary, backup]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: "test"})
	kvstatetest.Follow(t, ctx, store)
	pol := chain.CooldownPolicy{FailureThreshold: 1, Cooldown: 2 * time.Second, MaxCooldown: time.Hour, TripWindow: time.Hour}
	if err := store.RecordFailure(ctx, "primary", chain.Failure{Class: chain.ClassServer, Error: "HTTP 503", At: time.Now(), Policy: pol}); err != nil {
		t.Fatal(err)
	}

	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- watch(ctx, chainFile, false, &out, &errOut) }()
	waitUntil(t, 10*time.Second, "the state of both providers", func() bool {
		return strings.Count(out.String(), " state ") == 2
	})
	for _, want := range []string{`(?m) backup +state +closed, 0 failures`, `(?m) primary +state +open until \S+, 1 failures, 1 trips`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("watch start lacks %s:\n%s", want, out.String())
		}
	}

	// Probe as soon as the mirror sees the cooldown over: usually before
	// the server's expiry marker arrives.
	var adm chain.Admission
	waitUntil(t, 10*time.Second, "the cooldown to end", func() bool {
		adm = store.Admit(ctx, "primary", time.Now(), 5*time.Second)
		return adm.Allowed
	})
	if !adm.Probe {
		t.Fatalf("admitted without a probe: %+v", adm)
	}
	if err := store.RecordSuccess(ctx, "primary"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the closed event", func() bool { return strings.Contains(out.String(), " closed") })
	time.Sleep(1500 * time.Millisecond) // room for a late expiry marker
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] != "state" {
			kinds = append(kinds, f[2])
		}
	}
	if got := strings.Join(kinds, " "); got != "expired probe closed" {
		t.Errorf("events %q, want \"expired probe closed\":\n%s", got, out.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch: exit %d, stderr %s", code, errOut.String())
	}
}

// TestWatchBesideADemoPrintsTheRunningProcessorsProviders: with no chain
// file (beside `processor -demo`), watch starts with the state of the
// providers the running processors record, as status lists them, those
// without recorded state too.
func TestWatchBesideADemoPrintsTheRunningProcessorsProviders(t *testing.T) {
	store := besideADemo(t)
	recordRunning(t, store, "proc-1", "providers:\n  - {name: primary, type: openai, model: m1}\n"+
		"  - {name: template, type: rules, default_reply: later}\nchains:\n  default: [primary, template]\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- watch(ctx, "", false, &out, &errOut) }()
	waitUntil(t, 10*time.Second, "the state of both providers", func() bool {
		return strings.Count(out.String(), " state ") == 2
	})
	for _, want := range []string{`(?m) primary +state +closed, 0 failures`, `(?m) template +state +closed, 0 failures`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("watch start lacks %s:\n%s", want, out.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch: exit %d, stderr %s", code, errOut.String())
	}
}
