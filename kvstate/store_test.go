package kvstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// eventually polls cond every 10ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type env struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	ctx context.Context
}

// setup starts a server and opens the bucket; ctx ends with the test.
func setup(t *testing.T) env {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := kvstate.OpenBucket(ctx, js, 1)
	if err != nil {
		t.Fatalf("OpenBucket: %v", err)
	}
	return env{js: js, kv: kv, ctx: ctx}
}

// store starts a Store named id on the bucket; its watcher ends with the test.
func (e env) store(t *testing.T, id string, now func() time.Time) *kvstate.Store {
	t.Helper()
	s := kvstate.New(e.js, e.kv, kvstate.Options{ID: id, Now: now})
	kvstatetest.Follow(t, e.ctx, s)
	return s
}

func policy(threshold int, cooldown time.Duration) chain.CooldownPolicy {
	return chain.CooldownPolicy{
		FailureThreshold: threshold,
		Cooldown:         cooldown,
		MaxCooldown:      4 * cooldown,
		TripWindow:       time.Hour,
		AuthCooldown:     time.Hour,
	}
}

func serverFailure(p chain.CooldownPolicy) chain.Failure {
	return chain.Failure{Class: chain.ClassServer, Error: "503 Service Unavailable", At: time.Now(), Policy: p}
}

func getHealth(t *testing.T, e env, provider string) (kvstate.Health, uint64) {
	t.Helper()
	entry, err := e.kv.Get(e.ctx, kvstate.HealthKey(provider))
	if err != nil {
		t.Fatalf("get %s: %v", kvstate.HealthKey(provider), err)
	}
	var h kvstate.Health
	if err := json.Unmarshal(entry.Value(), &h); err != nil {
		t.Fatalf("decode %s: %v", entry.Value(), err)
	}
	return h, entry.Revision()
}

func TestOpenBucket(t *testing.T) {
	e := setup(t)
	for i := range 2 { // setup opened it once; a second and third open change nothing
		kv, err := kvstate.OpenBucket(e.ctx, e.js, 1)
		if err != nil {
			t.Fatalf("open %d: %v", i+2, err)
		}
		st, err := kv.Status(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Bucket() != "detour_providers" {
			t.Errorf("bucket = %q", st.Bucket())
		}
		if st.History() != 1 {
			t.Errorf("History = %d, want 1", st.History())
		}
		if st.LimitMarkerTTL() != 5*time.Minute {
			t.Errorf("LimitMarkerTTL = %v, want 5m", st.LimitMarkerTTL())
		}
		if !st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.AllowMsgTTL {
			t.Error("bucket does not allow per-key TTLs")
		}
	}
	// Values survive a reopen.
	if _, err := e.kv.Put(e.ctx, "p.health", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kvstate.OpenBucket(e.ctx, e.js, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Get(e.ctx, "p.health"); err != nil {
		t.Errorf("value lost on reopen: %v", err)
	}
}

func TestRecordFailureOpensCooldownSeenByAll(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)
	p := policy(3, 30*time.Second)

	var lastAt time.Time
	for i := 1; i <= 3; i++ {
		f := serverFailure(p)
		lastAt = f.At
		if err := a.RecordFailure(e.ctx, "primary", f); err != nil {
			t.Fatalf("failure %d: %v", i, err)
		}
		_, cooling := a.Cooling("primary", time.Now())
		if cooling != (i == 3) {
			t.Fatalf("after failure %d: A cooling = %v", i, cooling)
		}
	}

	entry, err := e.kv.Get(e.ctx, kvstate.CooldownKey("primary"))
	if err != nil {
		t.Fatalf("cooldown key: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(entry.Value(), &raw); err != nil {
		t.Fatal(err)
	}
	wantUntil := lastAt.Add(30 * time.Second).UTC().Truncate(time.Millisecond)
	until, err := time.Parse(time.RFC3339, raw["until"].(string))
	if err != nil || !until.Equal(wantUntil) {
		t.Errorf("until = %v (%v), want %v", raw["until"], err, wantUntil)
	}
	want := map[string]any{"class": "server", "reason": "503 Service Unavailable", "trip": 1.0, "duration_s": 30.0, "by": "proc-a"}
	for k, v := range want {
		if raw[k] != v {
			t.Errorf("cooldown %s = %#v, want %#v", k, raw[k], v)
		}
	}

	// The key carries a server TTL of the cooldown's length.
	kvStream, err := e.js.Stream(e.ctx, "KV_"+kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := kvStream.GetLastMsgForSubject(e.ctx, "$KV."+kvstate.Bucket+"."+kvstate.CooldownKey("primary"))
	if err != nil {
		t.Fatal(err)
	}
	if ttl := msg.Header.Get(jetstream.MsgTTLHeader); ttl != "30s" {
		t.Errorf("cooldown TTL header = %q, want 30s", ttl)
	}

	h, _ := getHealth(t, e, "primary")
	if h.ConsecutiveFailures != 3 || h.Trips != 1 || h.LastClass != chain.ClassServer || h.LastTrip.IsZero() {
		t.Errorf("health = %+v", h)
	}

	// B honours it from its mirror, with no call of its own.
	start := time.Now()
	// Health is written before the cooldown key, and its trip alone makes
	// B cooling: wait for the key as well.
	eventually(t, 3*time.Second, "B sees the cooldown", func() bool {
		_, cooling := b.Cooling("primary", time.Now())
		_, mirrored := b.CooldownForTest("primary")
		return cooling && mirrored
	})
	t.Logf("B saw the cooldown after %v", time.Since(start))
	if u, _ := b.Cooling("primary", time.Now()); !u.Equal(wantUntil) {
		t.Errorf("B until = %v, want %v", u, wantUntil)
	}
	if c, ok := b.CooldownForTest("primary"); !ok || c.By != "proc-a" || c.Trip != 1 || c.DurationS != 30 {
		t.Errorf("B cooldown = %+v %v", c, ok)
	}
	eventually(t, 3*time.Second, "B mirrors the health", func() bool {
		bh, ok := b.Health("primary")
		return ok && bh.ConsecutiveFailures == 3
	})

	// More failures while cooling count but open nothing new, from either store.
	rev := entry.Revision()
	for _, s := range []*kvstate.Store{a, b} {
		if err := s.RecordFailure(e.ctx, "primary", serverFailure(p)); err != nil {
			t.Fatal(err)
		}
	}
	h, _ = getHealth(t, e, "primary")
	if h.ConsecutiveFailures != 5 || h.Trips != 1 {
		t.Errorf("after failures while cooling: %+v, want 5 failures and 1 trip", h)
	}
	if entry, err := e.kv.Get(e.ctx, kvstate.CooldownKey("primary")); err != nil || entry.Revision() != rev {
		t.Errorf("cooldown rewritten while running: %v", err)
	}
	if _, ok := a.Cooling("other", time.Now()); ok {
		t.Error("an untouched provider is cooling")
	}
}

func TestRecordFailureConcurrent(t *testing.T) {
	e := setup(t)
	stores := []*kvstate.Store{e.store(t, "proc-a", nil), e.store(t, "proc-b", nil)}
	p := policy(5, 30*time.Second)
	const perStore = 20

	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*perStore)
	for _, s := range stores {
		for range perStore {
			wg.Go(func() {
				if err := s.RecordFailure(e.ctx, "flaky", serverFailure(p)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("RecordFailure: %v", err)
	}

	h, _ := getHealth(t, e, "flaky")
	if h.ConsecutiveFailures != len(stores)*perStore {
		t.Errorf("consecutive_failures = %d, want %d", h.ConsecutiveFailures, len(stores)*perStore)
	}
	if h.Trips != 1 {
		t.Errorf("trips = %d, want exactly one cooldown opened", h.Trips)
	}
	entry, err := e.kv.Get(e.ctx, kvstate.CooldownKey("flaky"))
	if err != nil {
		t.Fatalf("cooldown key: %v", err)
	}
	var c kvstate.Cooldown
	if err := json.Unmarshal(entry.Value(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Trip != 1 || c.DurationS != 30 {
		t.Errorf("cooldown = %+v, want trip 1 of 30s", c)
	}
	for i, s := range stores {
		if _, ok := s.Cooling("flaky", time.Now()); !ok {
			t.Errorf("store %d does not see the cooldown", i)
		}
	}
}

func TestRecordSuccess(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	p := policy(3, 30*time.Second)

	// Nothing recorded yet: a success writes nothing at all.
	if err := a.RecordSuccess(e.ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Get(e.ctx, kvstate.HealthKey("steady")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("success on a fresh provider wrote its health: err = %v", err)
	}

	for range 2 {
		if err := a.RecordFailure(e.ctx, "steady", serverFailure(p)); err != nil {
			t.Fatal(err)
		}
	}
	before, rev := getHealth(t, e, "steady")
	if before.ConsecutiveFailures != 2 || !before.LastSuccess.IsZero() {
		t.Fatalf("health after 2 failures = %+v", before)
	}

	start := time.Now().Add(-time.Millisecond)
	if err := a.RecordSuccess(e.ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	after, rev2 := getHealth(t, e, "steady")
	if rev2 == rev {
		t.Fatal("success after failures wrote nothing")
	}
	if after.ConsecutiveFailures != 0 {
		t.Errorf("consecutive_failures = %d after a success", after.ConsecutiveFailures)
	}
	if after.LastSuccess.Before(start) || after.LastSuccess.After(time.Now()) {
		t.Errorf("last_success = %v, want about now", after.LastSuccess)
	}
	if after.LastClass != before.LastClass || !after.LastFailure.Equal(before.LastFailure) {
		t.Errorf("the last failure was not kept: %+v", after)
	}
	if h, _ := a.Health("steady"); h.ConsecutiveFailures != 0 {
		t.Errorf("A's mirror still shows %d failures", h.ConsecutiveFailures)
	}

	// Nothing left to reset: no write, the revision stays.
	for range 3 {
		if err := a.RecordSuccess(e.ctx, "steady"); err != nil {
			t.Fatal(err)
		}
	}
	if _, rev3 := getHealth(t, e, "steady"); rev3 != rev2 {
		t.Errorf("a success with nothing to reset wrote revision %d (was %d)", rev3, rev2)
	}

	// A second processor whose mirror lags behind a reset writes nothing either.
	b := e.store(t, "proc-b", nil)
	if err := b.RecordSuccess(e.ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	if _, rev4 := getHealth(t, e, "steady"); rev4 != rev2 {
		t.Errorf("B's success wrote revision %d (was %d)", rev4, rev2)
	}
}

func TestCooldownExpiresByTTL(t *testing.T) {
	e := setup(t)
	a := e.store(t, "proc-a", nil)
	b := e.store(t, "proc-b", nil)

	w, err := e.kv.WatchAll(e.ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var purged, opened atomic.Bool
	go func() { // ends when the watcher stops at the end of the test
		for entry := range w.Updates() {
			if entry == nil || entry.Key() != kvstate.CooldownKey("blip") {
				continue
			}
			switch entry.Operation() {
			case jetstream.KeyValuePut:
				opened.Store(true)
			case jetstream.KeyValuePurge:
				purged.Store(true)
			}
		}
	}()

	if err := a.RecordFailure(e.ctx, "blip", serverFailure(policy(1, time.Second))); err != nil {
		t.Fatal(err)
	}
	if c, ok := a.CooldownForTest("blip"); !ok || c.DurationS != 1 {
		t.Fatalf("A cooldown = %+v %v, want 1s", c, ok)
	}
	eventually(t, 3*time.Second, "B mirrors the cooldown", func() bool {
		_, ok := b.CooldownForTest("blip")
		return ok
	})
	eventually(t, 3*time.Second, "the watcher sees the cooldown open", opened.Load)

	// Nothing deletes it: the server's TTL removes the key and both mirrors
	// drop it when the marker arrives.
	eventually(t, 6*time.Second, "the key expires on the server", func() bool {
		_, err := e.kv.Get(e.ctx, kvstate.CooldownKey("blip"))
		return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
	})
	eventually(t, 6*time.Second, "the watcher sees a purge marker", purged.Load)
	for name, s := range map[string]*kvstate.Store{"A": a, "B": b} {
		eventually(t, 3*time.Second, name+" drops the cooldown from its mirror", func() bool {
			_, ok := s.CooldownForTest("blip")
			return !ok
		})
		if _, ok := s.Cooling("blip", time.Now()); ok {
			t.Errorf("%s still cooling after expiry", name)
		}
	}
	// The health is untouched by expiry: the count stays until a success.
	if h, _ := getHealth(t, e, "blip"); h.ConsecutiveFailures != 1 || h.Trips != 1 {
		t.Errorf("health after expiry = %+v", h)
	}
}

// earliestReopen is the earliest end of the running cooldowns among
// providers at now, or the zero time when none of them is cooling: what the
// chain reads from Cooling for chain.ExhaustedError.ReopenAt.
func earliestReopen(s *kvstate.Store, now time.Time, providers []string) time.Time {
	var earliest time.Time
	for _, p := range providers {
		if until, ok := s.Cooling(p, now); ok && (earliest.IsZero() || until.Before(earliest)) {
			earliest = until
		}
	}
	return earliest
}

func TestEarliestReopen(t *testing.T) {
	e := setup(t)
	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	setNow(time.Now())
	a := e.store(t, "proc-a", func() time.Time { return *now.Load() })
	p := policy(1, time.Minute)

	at := *now.Load()
	for provider, d := range map[string]time.Duration{"long": 30 * time.Second, "short": 10 * time.Second} {
		f := serverFailure(p)
		f.At, f.Class, f.CooldownFor = at, chain.ClassRateLimit, d
		if err := a.RecordFailure(e.ctx, provider, f); err != nil {
			t.Fatal(err)
		}
	}
	longUntil, _ := a.Cooling("long", at)
	shortUntil, _ := a.Cooling("short", at)
	if !longUntil.Equal(at.Add(30*time.Second).UTC().Truncate(time.Millisecond)) || !shortUntil.Equal(at.Add(10*time.Second).UTC().Truncate(time.Millisecond)) {
		t.Fatalf("untils: long %v short %v", longUntil, shortUntil)
	}

	tests := []struct {
		name      string
		now       time.Time
		providers []string
		want      time.Time
	}{
		{"none", at, nil, time.Time{}},
		{"healthy only", at, []string{"healthy"}, time.Time{}},
		{"one", at, []string{"long", "healthy"}, longUntil},
		{"earliest of two", at, []string{"long", "short", "healthy"}, shortUntil},
		{"order does not matter", at, []string{"short", "long"}, shortUntil},
		{"short one ended", at.Add(15 * time.Second), []string{"long", "short"}, longUntil},
		{"all ended", at.Add(time.Minute), []string{"long", "short"}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := earliestReopen(a, tt.now, tt.providers); !got.Equal(tt.want) {
				t.Errorf("earliest reopen of %v = %v, want %v", tt.providers, got, tt.want)
			}
		})
	}
}
