package cache_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
)

func openStore(t *testing.T) (*cache.Store, jetstream.JetStream) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Start(t))
	s, err := cache.Open(t.Context(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func entry(content string, created time.Time, fresh, stale time.Duration) cache.Entry {
	return cache.Entry{V: cache.EntryVersion, CreatedAt: created, FreshUntil: created.Add(fresh), StaleUntil: created.Add(fresh + stale),
		Provider: "p", Model: "m", Content: content, Usage: chain.Usage{PromptTokens: 1, CompletionTokens: 2}}
}

func TestOpenCreatesTheBucketIdempotently(t *testing.T) {
	_, js := openStore(t)
	if _, err := cache.Open(t.Context(), js, 1); err != nil {
		t.Fatalf("second Open: %v", err)
	}
	kv, err := js.KeyValue(t.Context(), cache.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if st.History() != 1 || st.LimitMarkerTTL() <= 0 || !info.Config.AllowMsgTTL {
		t.Errorf("bucket history %d, marker TTL %s, per-message TTL %v; want 1, set, allowed", st.History(), st.LimitMarkerTTL(), info.Config.AllowMsgTTL)
	}
}

func TestStorePutIsCompareAndSet(t *testing.T) {
	s, js := openStore(t)
	ctx := t.Context()
	const key = "c.shared.abc"
	if _, rev, found, err := s.Get(ctx, key); err != nil || found || rev != 0 {
		t.Fatalf("Get of a new key = rev %d, found %v, %v; want nothing", rev, found, err)
	}
	now := time.Now().UTC()
	if err := s.Put(ctx, key, entry("one", now, 10*time.Minute, 24*time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, key, entry("two", now, 10*time.Minute, 24*time.Hour), 0)
	if !errors.Is(err, cache.ErrConflict) || !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("second Put over revision 0 = %v, want ErrConflict", err)
	}
	e, rev, found, err := s.Get(ctx, key)
	if err != nil || !found || e.Content != "one" || e.Usage.CompletionTokens != 2 || !e.FreshUntil.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("Get = %+v, %v, %v; want the first entry", e, found, err)
	}
	if err := s.Put(ctx, key, entry("three", now, 10*time.Minute, 24*time.Hour), rev); err != nil {
		t.Fatalf("Put over the revision read: %v", err)
	}
	// The key's TTL runs to stale_until, in whole seconds.
	stream, _ := js.Stream(ctx, "KV_"+cache.Bucket)
	m, err := stream.GetLastMsgForSubject(ctx, "$KV."+cache.Bucket+"."+key)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(jetstream.MsgTTLHeader); got != (24*time.Hour + 10*time.Minute).String() {
		t.Errorf("TTL header %q, want %s", got, 24*time.Hour+10*time.Minute)
	}
}

// TestStoreReplacesAnExpiredKey: once the server has removed an expired
// key, leaving its marker, Get reports nothing but the marker's revision,
// over which Put writes.
func TestStoreReplacesAnExpiredKey(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	const key = "c.shared.expiring"
	if err := s.Put(ctx, key, entry("old", time.Now(), time.Second, 0), 0); err != nil {
		t.Fatal(err)
	}
	var rev uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, r, found, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			rev = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rev == 0 {
		t.Fatal("an expired key's revision is 0: its marker was not seen")
	}
	if err := s.Put(ctx, key, entry("new", time.Now(), time.Minute, 0), rev); err != nil {
		t.Fatalf("Put over the marker: %v", err)
	}
	if e, _, found, _ := s.Get(ctx, key); !found || e.Content != "new" {
		t.Errorf("Get = %+v, %v; want the new entry", e, found)
	}
}

func TestKeyJoinsChainScopeAndFingerprint(t *testing.T) {
	if got := cache.Key("default", "shared", "ab12"); got != "default.shared.ab12" {
		t.Errorf("Key = %q", got)
	}
}

// TestStoreGetAndEnsureRunConcurrently: Ensure (run by a worker that found
// the bucket gone) and Get (run by the others) share the store; under
// -race this fails if the stream they share is not synchronized.
func TestStoreGetAndEnsureRunConcurrently(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if _, _, _, err := s.Get(ctx, "c.shared.race"); err != nil {
					t.Errorf("Get: %v", err)
					return
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 5 {
				if err := s.Ensure(ctx); err != nil {
					t.Errorf("Ensure: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStoreGetReportsAnInvalidEntry: Get does not return an invalid entry
// as found; it says ErrInvalidEntry with the revision to write over.
func TestStoreGetReportsAnInvalidEntry(t *testing.T) {
	s, js := openStore(t)
	ctx := t.Context()
	const key = "c.shared.bad"
	ack, err := js.Publish(ctx, "$KV."+cache.Bucket+"."+key, withField(t, "content", `""`))
	if err != nil {
		t.Fatal(err)
	}
	e, rev, found, err := s.Get(ctx, key)
	if !errors.Is(err, cache.ErrInvalidEntry) || found || rev != ack.Sequence {
		t.Fatalf("Get = %+v, rev %d, found %v, %v; want ErrInvalidEntry at revision %d", e, rev, found, err, ack.Sequence)
	}
	if err := s.Put(ctx, key, entry("good", time.Now(), time.Minute, 0), rev); err != nil {
		t.Fatalf("Put over the invalid entry: %v", err)
	}
}

// TestStatsAndPurgeRefuseABadChainName: a chain name that the chain file
// would refuse (a wildcard, a dot, a space) selects nothing and removes
// nothing: it is ErrBadChainName.
func TestStatsAndPurgeRefuseABadChainName(t *testing.T) {
	s, js := openStore(t)
	ctx := t.Context()
	for _, key := range []string{"a.shared.x", "b.shared.y"} {
		if err := s.Put(ctx, key, entry("answer", time.Now(), time.Minute, 0), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"*", ">", "a b", "a.b", "a.>", "a\t", "é"} {
		if err := cache.CheckChainName(name); !errors.Is(err, cache.ErrBadChainName) {
			t.Errorf("CheckChainName(%q) = %v, want ErrBadChainName", name, err)
		}
		if _, err := cache.Stats(ctx, js, name, time.Now()); !errors.Is(err, cache.ErrBadChainName) {
			t.Errorf("Stats(%q) = %v, want ErrBadChainName", name, err)
		}
		if n, err := cache.Purge(ctx, js, name); !errors.Is(err, cache.ErrBadChainName) || n != 0 {
			t.Errorf("Purge(%q) = %d, %v; want ErrBadChainName", name, n, err)
		}
	}
	for _, name := range []string{"", "a", "default", "my_chain-2"} {
		if err := cache.CheckChainName(name); err != nil {
			t.Errorf("CheckChainName(%q) = %v, want nil", name, err)
		}
	}
	rows, err := cache.Stats(ctx, js, "", time.Now())
	if err != nil || len(rows) != 2 || rows[0].Entries != 1 || rows[1].Entries != 1 {
		t.Errorf("Stats after the refused purges = %+v, %v; want both chains' entries kept", rows, err)
	}
}
