package kvstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/kvstate"
)

// putRaw writes value to key as a hand or a script would: no TTL.
func putRaw(t *testing.T, e env, key, value string) {
	t.Helper()
	if _, err := e.kv.Put(e.ctx, key, []byte(value)); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// readOnly loads a store the way `processor status` does: no js, no Run.
func readOnly(t *testing.T, e env, opts kvstate.Options) *kvstate.Store {
	t.Helper()
	s := kvstate.New(nil, e.kv, opts)
	if err := s.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTripPastYear9999CostsOnlyItsProvider: a health value whose trip ends
// past year 9999 still lets status and the watch's state rows be written
// as JSON for every provider; its provider reads as open for the trip's
// length from the write, and the store logs the value once.
func TestTripPastYear9999CostsOnlyItsProvider(t *testing.T) {
	e := setup(t)
	putRaw(t, e, kvstate.HealthKey("h1"), `{"consecutive_failures":3,"trips":1,"last_trip":"9999-12-31T23:00:00Z","last_trip_s":7200}`)
	putRaw(t, e, kvstate.HealthKey("ok"), `{"consecutive_failures":1,"trips":0,"last_error":"503"}`)
	var logs bytes.Buffer
	s := readOnly(t, e, kvstate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := time.Now()
	rows := s.Status(now, "quiet")
	if _, err := json.Marshal(rows); err != nil {
		t.Fatalf("status rows as JSON: %v", err)
	}
	if len(rows) != 3 || rows[0].Provider != "h1" || rows[0].State != kvstate.StateOpen {
		t.Fatalf("rows %+v", rows)
	}
	if until := rows[0].CooldownUntil; until.After(now.Add(2*time.Hour+time.Minute)) || until.Before(now.Add(time.Hour)) {
		t.Errorf("h1 open until %s, want about two hours from the write", until)
	}
	if rows[1].Provider != "ok" || rows[1].ConsecutiveFailures != 1 || rows[1].LastError != "503" {
		t.Errorf("the other provider's row changed: %+v", rows[1])
	}
	if n := strings.Count(logs.String(), "key=h1.health"); n != 1 {
		t.Errorf("h1.health logged %d times, want once:\n%s", n, logs.String())
	}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	states := 0
	err := kvstate.WatchEventsWithState(ctx, e.kv, []string{"quiet"}, time.Now, func(ev kvstate.Event) {
		if _, err := json.Marshal(ev); err != nil {
			t.Errorf("state event of %s as JSON: %v", ev.Provider, err)
		}
		if states++; states == 3 {
			cancel()
		}
	})
	if err != nil || states != 3 {
		t.Fatalf("watch: %v, %d state events, want 3", err, states)
	}
}

// TestHandWrittenCooldownEndsWithinItsLength: a cooldown key without a TTL
// whose until lies years ahead runs no longer than its duration_s from the
// write, and never longer than the provider's ceiling; a key without
// duration_s ends when it was written. A trip replaces such a key.
func TestHandWrittenCooldownEndsWithinItsLength(t *testing.T) {
	e := setup(t)
	putRaw(t, e, kvstate.CooldownKey("bare"), `{"until":"2030-01-01T00:00:00Z","class":"server"}`)
	putRaw(t, e, kvstate.CooldownKey("long"), `{"until":"2030-01-01T00:00:00Z","class":"server","duration_s":315360000}`)
	putRaw(t, e, kvstate.CooldownKey("negative"), `{"until":"2030-01-01T00:00:00Z","class":"server","duration_s":-5}`)
	ceiling := func(string) time.Duration { return time.Hour }
	s := readOnly(t, e, kvstate.Options{Ceiling: ceiling})
	now := time.Now()
	for _, p := range []string{"bare", "negative"} {
		if until, cooling := s.Cooling(p, now); cooling {
			t.Errorf("%s cooling until %s, want ended at its write", p, until)
		}
	}
	until, cooling := s.Cooling("long", now)
	if !cooling || until.After(now.Add(time.Hour+time.Minute)) {
		t.Errorf("long: cooling %v until %s, want at most the 1h ceiling", cooling, until)
	}
	rows := s.Status(now)
	if _, err := json.Marshal(rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Cooldown == nil || r.Cooldown.DurationS < 0 || r.Cooldown.DurationS > 3600 {
			t.Errorf("%s: cooldown %+v, want duration_s within 0..3600", r.Provider, r.Cooldown)
		}
	}

	w := kvstate.New(e.js, e.kv, kvstate.Options{ID: "proc-1", Ceiling: ceiling})
	if err := w.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.RecordFailure(e.ctx, "long", chain.Failure{Class: chain.ClassAuth, Error: "401", At: time.Now(),
		CooldownFor: time.Hour, Policy: policy(3, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if c, ttl := storedCooldown(t, e, "long"); c.By != "proc-1" || ttl == "" {
		t.Errorf("after a trip the key is %+v (TTL %q), want proc-1's with a TTL", c, ttl)
	}
}

// TestHealthCountsAreBounded: a count too large to increment or below zero
// is read within range, so the next failures trip the provider as its
// threshold says.
func TestHealthCountsAreBounded(t *testing.T) {
	e := setup(t)
	putRaw(t, e, kvstate.HealthKey("huge"), `{"consecutive_failures":9223372036854775807,"trips":9223372036854775807}`)
	putRaw(t, e, kvstate.HealthKey("negative"), `{"consecutive_failures":-1000000,"trips":-3}`)
	s := e.store(t, "proc-1", nil)
	for _, p := range []string{"huge", "negative"} {
		if err := s.RecordFailure(e.ctx, p, serverFailure(policy(1, time.Minute))); err != nil {
			t.Fatal(err)
		}
		if _, cooling := s.Cooling(p, time.Now()); !cooling {
			h, _ := s.Health(p)
			t.Errorf("%s: a failure at threshold 1 opened no cooldown; health %+v", p, h)
		}
		if h, _ := getHealth(t, e, p); h.ConsecutiveFailures < 1 || h.ConsecutiveFailures > 1_000_000_001 || h.Trips < 1 {
			t.Errorf("%s: stored health %+v", p, h)
		}
	}
}
