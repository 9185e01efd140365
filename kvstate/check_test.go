package kvstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

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
// past year 9999, which no writer makes, is ignored and logged once: every
// provider's status row and the watch's state events can still be written
// as JSON, and the other provider's row is as stored.
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
	if len(rows) != 2 || rows[0].Provider != "ok" || rows[1].Provider != "quiet" {
		t.Fatalf("rows %+v; want h1's value ignored", rows)
	}
	if rows[0].ConsecutiveFailures != 1 || rows[0].LastError != "503" {
		t.Errorf("the other provider's row changed: %+v", rows[0])
	}
	if n := strings.Count(logs.String(), "key=h1.health"); n != 1 || !strings.Contains(logs.String(), "outside the years 0000 to 9999") {
		t.Errorf("h1.health logged %d times, want once saying why:\n%s", n, logs.String())
	}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	states := 0
	err := kvstate.WatchEvents(ctx, e.kv, []string{"quiet"}, time.Now, func(ev kvstate.Event) {
		if _, err := json.Marshal(ev); err != nil {
			t.Errorf("state event of %s as JSON: %v", ev.Provider, err)
		}
		if ev.Provider == "h1" {
			t.Errorf("a state event of h1, whose value is ignored: %+v", ev)
		}
		if states++; states == 2 {
			cancel()
		}
	})
	if err != nil || states != 2 {
		t.Fatalf("watch: %v, %d state events, want 2", err, states)
	}
}

// TestHandWrittenCooldownIsReadAsWritten: the bucket is the fleet's own, so
// a cooldown key written by hand, without a TTL, cools its provider until
// its until; one that breaks a writer's rule (a negative duration_s) is
// ignored and logged.
func TestHandWrittenCooldownIsReadAsWritten(t *testing.T) {
	e := setup(t)
	until := time.Now().Add(90 * time.Minute).UTC().Truncate(time.Second)
	putRaw(t, e, kvstate.CooldownKey("bare"), `{"until":"`+until.Format(time.RFC3339)+`","class":"server"}`)
	putRaw(t, e, kvstate.CooldownKey("negative"), `{"until":"2030-01-01T00:00:00Z","class":"server","duration_s":-5}`)
	var logs bytes.Buffer
	s := readOnly(t, e, kvstate.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := time.Now()
	if got, cooling := s.Cooling("bare", now); !cooling || !got.Equal(until) {
		t.Errorf("bare: cooling %v until %s, want until %s as written", cooling, got, until)
	}
	if got, cooling := s.Cooling("negative", now); cooling {
		t.Errorf("negative: cooling until %s, want the value ignored", got)
	}
	if !strings.Contains(logs.String(), "key=negative.cooldown") || !strings.Contains(logs.String(), "duration_s -5") {
		t.Errorf("the ignored value is not logged with its reason:\n%s", logs.String())
	}
	if _, err := json.Marshal(s.Status(now)); err != nil {
		t.Fatal(err)
	}
}

// TestHealthCountsOutOfRangeAreRewritten: a count too large to increment or
// below zero breaks a writer's rule; the next counted failure writes the
// health back from scratch, so the provider trips as its threshold says.
func TestHealthCountsOutOfRangeAreRewritten(t *testing.T) {
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
		if h, _ := getHealth(t, e, p); h.ConsecutiveFailures != 1 || h.Trips != 1 {
			t.Errorf("%s: stored health %+v, want one failure and one trip", p, h)
		}
	}
}
