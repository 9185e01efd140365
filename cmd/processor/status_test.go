package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
)

// TestStatusCommand runs `processor status` against a server whose bucket
// holds a cooling provider: the row shows it open, with its failures and
// last error; without a bucket the command says no processor has started.
func TestStatusCommand(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())

	var out, errOut bytes.Buffer
	if code := run([]string{"status"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no processor has started") {
		t.Fatalf("status without a bucket: exit %d, stderr %q", code, errOut.String())
	}

	ctx := context.Background()
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	store := kvstate.New(kv, kvstate.Options{ID: "test"})
	if err := store.Start(ctx); err != nil {
		t.Fatal(err)
	}
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
	fields := strings.Fields(strings.Split(out.String(), "\n")[1])
	if len(fields) < 5 || fields[0] != "primary" || fields[1] != "open" || fields[2] != "1" || !strings.Contains(out.String(), "HTTP 503 from primary") {
		t.Fatalf("status table:\n%s", out.String())
	}
}
