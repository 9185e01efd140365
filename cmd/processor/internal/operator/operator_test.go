package operator_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/operator"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/kvstate"
)

func fleet(t *testing.T) operator.Fleet {
	t.Helper()
	file, err := config.Parse([]byte(`
providers:
  - {name: primary, type: openai, model: m, max_cooldown: 2h, auth_cooldown: 30m}
  - {name: backup, type: openai, model: m}
  - {name: template, type: rules, default_reply: sorry}
chains:
  default: [primary, backup, template]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return operator.Fleet{File: file, Path: "detour.yaml", By: "alice@host"}
}

// TestCheckTrip refuses, as ErrUsage and before anything is connected, a
// provider the chain file lacks, a -for that is no KV TTL or longer than
// the provider's longest cooldown, and a missing or long -reason.
func TestCheckTrip(t *testing.T) {
	f := fleet(t)
	for _, tc := range []struct {
		name   string
		d      time.Duration
		reason string
		want   string // "" accepts
	}{
		{"primary", 30 * time.Second, "maintenance", ""},
		{"primary", 2 * time.Hour, "maintenance", ""},
		{"backup", time.Hour, "maintenance", ""},
		{"template", time.Second, "no templates today", ""},
		{"primary", 2*time.Hour + time.Second, "x", "-for 2h0m1s is longer than primary's longest cooldown in detour.yaml, 2h0m0s (the larger of its max_cooldown and auth_cooldown)"},
		{"backup", 61 * time.Minute, "x", "longer than backup's longest cooldown in detour.yaml, 1h0m0s"},
		{"primary", 0, "x", "-for 0s: a cooldown is whole seconds, at least 1s (KV TTLs are)"},
		{"primary", 999 * time.Millisecond, "x", "-for 999ms: a cooldown is whole seconds"},
		{"primary", 1500 * time.Millisecond, "x", "-for 1.5s: a cooldown is whole seconds"},
		{"primary", -time.Minute, "x", "-for -1m0s: a cooldown is whole seconds"},
		{"primary", time.Minute, " ", "-reason is required"},
		{"primary", time.Minute, strings.Repeat("é", 151), "-reason is 302 bytes, at most 300"},
		{"primay", time.Minute, "x", `no provider named "primay" in detour.yaml (did you mean "primary"?)`},
		{"zzz", time.Minute, "x", `no provider named "zzz" in detour.yaml (its providers: primary, backup, template)`},
	} {
		err := f.CheckTrip(tc.name, tc.d, tc.reason)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("trip %s for %s: %v, want it accepted", tc.name, tc.d, err)
		case tc.want != "" && (err == nil || !errors.Is(err, operator.ErrUsage) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("trip %s for %s (%q): %v, want ErrUsage saying %q", tc.name, tc.d, tc.reason, err, tc.want)
		}
	}
}

// TestCheckReset wants at least one provider, each of the chain file.
func TestCheckReset(t *testing.T) {
	f := fleet(t)
	if err := f.CheckReset([]string{"primary", "backup", "primary"}); err != nil {
		t.Errorf("reset primary backup primary: %v", err)
	}
	for _, names := range [][]string{nil, {"primary", "bakup"}} {
		if err := f.CheckReset(names); !errors.Is(err, operator.ErrUsage) {
			t.Errorf("reset %v: %v, want ErrUsage", names, err)
		}
	}
}

// TestWriteResetAndTrip: each line says what the provider was or now is,
// and whose its cooldown is; text from the bucket reaches the terminal
// visible, never as a control.
func TestWriteResetAndTrip(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out bytes.Buffer
	err := operator.WriteReset(&out, []operator.ResetResult{
		{Provider: "primary", ResetOutcome: kvstate.ResetOutcome{Done: true, Before: kvstate.ProviderStatus{State: kvstate.StateOpen,
			CooldownUntil: until, ConsecutiveFailures: 1, Trips: 1, Cooldown: &kvstate.Cooldown{Class: chain.ClassAuth, By: "host-1-ab\x1b[2J"}}}},
		{Provider: "backup"},
		{Provider: "x", NoBucket: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `primary: reset: was open until 2026-01-02T03:04:05Z (auth cooldown by host-1-ab\x1b[2J), 1 failures, 1 trips; now closed for every processor
backup: nothing to reset: closed, no cooldown, failures or trips recorded
x: nothing to reset: bucket detour_providers does not exist yet (no processor has started on this NATS)
`
	if out.String() != want {
		t.Errorf("WriteReset:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	c := &kvstate.Cooldown{Until: until, By: "alice@host", Reason: "maintenance", Operator: true}
	if err := operator.WriteTrip(&out, operator.TripResult{Provider: "primary", For: 30 * time.Second, Reason: "maintenance", HalfOpen: true,
		TripOutcome: kvstate.TripOutcome{Opened: true, Until: until, Cooldown: c}}); err != nil {
		t.Fatal(err)
	}
	if err := operator.WriteTrip(&out, operator.TripResult{Provider: "backup", For: 30 * time.Second,
		TripOutcome: kvstate.TripOutcome{Until: until, Cooldown: c}}); err != nil {
		t.Fatal(err)
	}
	want = `primary: tripped by alice@host for 30s, until 2026-01-02T03:04:05Z: maintenance; every processor skips it until then, then sends it one request as a probe (half-open)
backup: already cooling until 2026-01-02T03:04:05Z (tripped by operator alice@host: maintenance), no sooner than the 30s asked: left as it is (processor reset backup ends it)
`
	if out.String() != want {
		t.Errorf("WriteTrip:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestIdentity names the operator as user@host.
func TestIdentity(t *testing.T) {
	if id := operator.Identity(); strings.Count(id, "@") < 1 || strings.HasPrefix(id, "@") || strings.HasSuffix(id, "@") {
		t.Errorf("Identity() = %q, want user@host", id)
	}
}
