package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
)

// TestCacheCommand runs `processor cache` against a real server: stats
// (table, chain filter, JSON), purge of one chain and of all, and the
// errors of a server without the bucket and of bad usage, a -chain that
// is not a chain name included.
func TestCacheCommand(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	t.Setenv("DETOUR_NATS_URL", srv.ClientURL())
	cmd := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"cache"}, args...), &out, &errOut); code != wantCode {
			t.Fatalf("cache %v exited %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	if out := cmd(1, "stats"); !strings.Contains(out, "no bucket detour_cache") {
		t.Errorf("stats without a bucket: %q", out)
	}

	store, err := cache.Open(t.Context(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(key string, created time.Time) {
		t.Helper()
		e := cache.Entry{V: cache.EntryVersion, CreatedAt: created, FreshUntil: created.Add(time.Minute),
			StaleUntil: created.Add(time.Hour), Provider: "p", Model: "m", Content: "answer", Usage: chain.Usage{}}
		if err := store.Put(t.Context(), key, e, 0); err != nil {
			t.Fatal(err)
		}
	}
	put("default.shared.a", now)
	put("default.shared.b", now.Add(-10*time.Minute)) // stale
	put("other.t-1.c", now)

	out := cmd(0, "stats")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "CHAIN ENTRIES FRESH STALE EXPIRED BYTES" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "default 2 1 1 0 ") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "other 1 1 0 0 ") {
		t.Fatalf("stats:\n%s", out)
	}
	var row cache.ChainStats
	if err := json.Unmarshal([]byte(cmd(0, "stats", "-chain", "other", "-json")), &row); err != nil || row.Chain != "other" || row.Entries != 1 || row.Bytes == 0 {
		t.Fatalf("stats -chain other -json: %+v, %v", row, err)
	}

	// A chain name the chain file would refuse is bad usage, and removes
	// nothing.
	for _, bad := range []string{"*", ">", "a b", "default.>"} {
		if out := cmd(2, "purge", "-chain", bad); !strings.Contains(out, "chain name must match [A-Za-z0-9_-]+") {
			t.Errorf("purge -chain %q: %q", bad, out)
		}
		if out := cmd(2, "stats", "-chain", bad); !strings.Contains(out, "chain name must match [A-Za-z0-9_-]+") {
			t.Errorf("stats -chain %q: %q", bad, out)
		}
	}

	if out := cmd(0, "purge", "-chain", "default"); strings.TrimSpace(out) != "removed 2" {
		t.Errorf("purge -chain default: %q", out)
	}
	if out := cmd(0, "stats"); strings.Contains(out, "default") || !strings.Contains(out, "other") {
		t.Errorf("stats after purging default:\n%s", out)
	}
	if out := cmd(0, "purge"); strings.TrimSpace(out) != "removed 1" {
		t.Errorf("purge: %q", out)
	}

	cmd(2)
	cmd(2, "flush")
	cmd(2, "stats", "extra")
	cmd(0, "help")
}
