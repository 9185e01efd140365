package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// TestStatusCommand runs `processor status` against a server whose bucket
// holds a cooling provider: its row shows it open, with its failures and last
// error, and the chain file's other provider has a closed row; without a
// bucket the command says no processor has started.
func TestStatusCommand(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	chainFile := filepath.Join(t.TempDir(), "detour.yaml")
	writeFile(t, chainFile, `
providers:
  - {name: primary, type: openai, model: m1}
  - {name: backup, type: openai, model: m2}
chains:
  default: [primary, backup]
`)
	t.Setenv("DETOUR_CONFIG", chainFile)

	var out, errOut bytes.Buffer
	if code := run([]string{"status"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no processor has started") {
		t.Fatalf("status without a bucket: exit %d, stderr %q", code, errOut.String())
	}

	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := kvstate.New(js, kv, kvstate.Options{ID: "test"})
	kvstatetest.Follow(t, ctx, store)
	err = store.RecordFailure(ctx, "primary", chain.Failure{
		Class: chain.ClassServer, Error: "HTTP 503 from primary", At: time.Now(),
		Policy: chain.CooldownPolicy{FailureThreshold: 1, Cooldown: time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"status"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d, stderr %q", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	// Sorted by name: backup (from the chain file, no state: closed), then primary.
	backup, primary := strings.Fields(lines[1]), strings.Fields(lines[2])
	if len(backup) < 3 || backup[0] != "backup" || backup[1] != "closed" || backup[2] != "0" {
		t.Fatalf("status table lacks a closed row for backup:\n%s", out.String())
	}
	if len(primary) < 5 || primary[0] != "primary" || primary[1] != "open" || primary[2] != "1" || !strings.Contains(out.String(), "HTTP 503 from primary") {
		t.Fatalf("status table:\n%s", out.String())
	}
}

// TestStatusChainFileNote: without a chain file named or present (beside
// the demo) status says nothing about one; one named on purpose that is
// missing, or one that is refused, gets a one-line note.
func TestStatusChainFileNote(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DETOUR_CONFIG", "")
	os.Unsetenv("DETOUR_CONFIG")
	if known, note := chainProviders(""); known != nil || note != "" {
		t.Errorf("no chain file anywhere: %v, %q; want nothing and no note", known, note)
	}
	if _, note := chainProviders("other.yaml"); note != "chain file other.yaml not found" {
		t.Errorf("-config other.yaml: note %q", note)
	}
	t.Setenv("DETOUR_CONFIG", "nope.yaml")
	if _, note := chainProviders(""); note != "chain file nope.yaml not found" {
		t.Errorf("DETOUR_CONFIG=nope.yaml: note %q", note)
	}
	os.Unsetenv("DETOUR_CONFIG")
	writeFile(t, filepath.Join(dir, "detour.yaml"), "providers: [\n")
	if _, note := chainProviders(""); !strings.HasPrefix(note, "chain file detour.yaml not read: line ") || strings.Contains(note, "\n") {
		t.Errorf("a refused detour.yaml: note %q; want one line", note)
	}
	writeFile(t, filepath.Join(dir, "detour.yaml"), "providers:\n  - {name: solo, type: openai, model: m}\nchains:\n  default: [solo]\n")
	if known, note := chainProviders(""); len(known) != 1 || known[0] != "solo" || note != "" {
		t.Errorf("a good detour.yaml: %v, %q", known, note)
	}
	// status calls no provider: the key's variable need not be set.
	os.Unsetenv("DETOUR_TEST_UNSET_KEY")
	writeFile(t, filepath.Join(dir, "detour.yaml"), "providers:\n  - {name: keyed, type: openai, model: m, api_key_env: DETOUR_TEST_UNSET_KEY}\nchains:\n  default: [keyed]\n")
	if known, note := chainProviders(""); len(known) != 1 || known[0] != "keyed" || note != "" {
		t.Errorf("a detour.yaml whose key variable is unset: %v, %q", known, note)
	}
}
