package cache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
)

// nextFunc is a chain stand-in that counts its runs.
type nextFunc struct {
	runs atomic.Int32
	run  func(ctx context.Context, n int32, req chain.Request) (chain.Result, error)
}

func (f *nextFunc) Run(ctx context.Context, req *chain.Request) (chain.Result, error) {
	return f.run(ctx, f.runs.Add(1), *req)
}

func answer(content string) (chain.Result, error) {
	return chain.Result{Status: chain.StatusOK, Content: content, Provider: "primary", Model: "m",
		Attempts: []chain.Attempt{{Provider: "primary", Outcome: chain.OutcomeOK}}}, nil
}

func newRunner(t *testing.T, next cache.Next) *cache.Runner {
	t.Helper()
	store, _ := openStore(t)
	return newRunnerOn(t, store, next)
}

// newRunnerOn is newRunner on a given store.
func newRunnerOn(t *testing.T, store *cache.Store, next cache.Next) *cache.Runner {
	t.Helper()
	r, err := cache.New(cache.Config{Chain: "c", Next: next, Store: store,
		Settings: cache.Settings{TTL: time.Minute, StaleTTL: time.Hour}, Providers: []string{"primary", "template"}, Rules: []string{"template"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func cachedRequest(id string) chain.Request {
	return chain.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hi"}},
		Cache: chain.CacheControl{Scope: "shared", Fingerprint: func() string { return "f00d" }}}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	store, _ := openStore(t)
	next := &nextFunc{}
	for name, cfg := range map[string]cache.Config{
		"chain":    {Next: next, Store: store, Settings: cache.Settings{TTL: time.Second}},
		"next":     {Chain: "c", Store: store, Settings: cache.Settings{TTL: time.Second}},
		"store":    {Chain: "c", Next: next, Settings: cache.Settings{TTL: time.Second}},
		"ttl":      {Chain: "c", Next: next, Store: store},
		"negative": {Chain: "c", Next: next, Store: store, Settings: cache.Settings{TTL: time.Second, StaleTTL: -1}},
	} {
		if _, err := cache.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestRunnerWithoutFingerprintGoesStraightToTheChain(t *testing.T) {
	next := &nextFunc{run: func(context.Context, int32, chain.Request) (chain.Result, error) { return answer("a") }}
	r := newRunner(t, next)
	req := cachedRequest("x")
	req.Cache.Fingerprint = func() string { return "" }
	for range 2 {
		if res, err := r.Run(t.Context(), &req); err != nil || res.Cache != "" {
			t.Fatalf("Run = %+v, %v; want the chain's answer, no cache status", res, err)
		}
	}
	if got := next.runs.Load(); got != 2 {
		t.Errorf("chain ran %d times, want 2", got)
	}
}

// TestRunnerRetriesWhenTheSharedRunWasCut: a request that shared a run
// ended by the leader's own context (its deadline, a shutdown) is not
// failed for it: it runs again under its own.
func TestRunnerRetriesWhenTheSharedRunWasCut(t *testing.T) {
	entered := make(chan struct{})
	next := &nextFunc{run: func(ctx context.Context, n int32, _ chain.Request) (chain.Result, error) {
		if n == 1 {
			close(entered)
			<-ctx.Done()
			return chain.Result{Status: chain.StatusFailed}, fmt.Errorf("chain c: %w", ctx.Err())
		}
		return answer("second run")
	}}
	r := newRunner(t, next)
	leaderCtx, cutLeader := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var leaderErr error
	wg.Go(func() { _, leaderErr = r.Run(leaderCtx, new(cachedRequest("leader"))) })
	<-entered
	var res chain.Result
	var err error
	wg.Go(func() { res, err = r.Run(t.Context(), new(cachedRequest("follower"))) })
	time.Sleep(50 * time.Millisecond) // let the follower join the run, if it will
	cutLeader()
	wg.Wait()
	if !errors.Is(leaderErr, context.Canceled) {
		t.Errorf("leader: %v, want its cancellation", leaderErr)
	}
	if err != nil || res.Status != chain.StatusOK || res.Content != "second run" {
		t.Errorf("follower: %+v, %v; want the answer of a run of its own", res, err)
	}
}

// TestRunnerNoCacheSkipsAFreshEntryAndRefreshesIt: a no_cache request
// does not take a fresh entry; its answer replaces the entry.
func TestRunnerNoCacheSkipsAFreshEntryAndRefreshesIt(t *testing.T) {
	next := &nextFunc{run: func(_ context.Context, n int32, _ chain.Request) (chain.Result, error) {
		return answer(fmt.Sprintf("answer %d", n))
	}}
	r := newRunner(t, next)
	if res, _ := r.Run(t.Context(), new(cachedRequest("a"))); res.Cache != chain.CacheMiss || res.Content != "answer 1" {
		t.Fatalf("a: %+v, want a miss", res)
	}
	req := cachedRequest("b")
	req.Cache.NoCache = true
	if res, _ := r.Run(t.Context(), &req); res.Cache != chain.CacheMiss || res.Content != "answer 2" {
		t.Fatalf("b (no_cache): %+v, want a miss with a new answer", res)
	}
	res, _ := r.Run(t.Context(), new(cachedRequest("c")))
	if res.Cache != chain.CacheHit || res.Content != "answer 2" || res.Position != 0 || res.Degraded {
		t.Errorf("c: %+v, want a hit on the refreshed answer", res)
	}
}

// TestRunnerLeavesTheCallersRequestAlone: the stale entry a miss may fall
// back on reaches the chain on a copy of the request, not on the caller's.
func TestRunnerLeavesTheCallersRequestAlone(t *testing.T) {
	var sawStale bool
	next := &nextFunc{run: func(_ context.Context, n int32, req chain.Request) (chain.Result, error) {
		sawStale = sawStale || req.Stale != nil
		return answer(fmt.Sprintf("answer %d", n))
	}}
	store, _ := openStore(t)
	r, err := cache.New(cache.Config{Chain: "c", Next: next, Store: store,
		Settings: cache.Settings{TTL: time.Minute, StaleTTL: time.Hour}, Providers: []string{"primary"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), new(cachedRequest("first"))); err != nil {
		t.Fatal(err)
	}
	again := cachedRequest("again")
	again.Cache.NoCache = true // past the stored entry, to the chain, with the entry as its stale answer
	if _, err := r.Run(t.Context(), &again); err != nil {
		t.Fatal(err)
	}
	if !sawStale {
		t.Fatal("the chain was given no stale answer")
	}
	if again.Stale != nil {
		t.Fatalf("the caller's request was given the stale answer %+v", again.Stale)
	}
}

// TestRunnerCountsHitsMissesAndStaleAnswers: the Runner tells its Observer
// how the cache took part in each request of the chain (the metric
// detour_cache_total counts what it is told).
func TestRunnerCountsHitsMissesAndStaleAnswers(t *testing.T) {
	next := &nextFunc{run: func(_ context.Context, n int32, req chain.Request) (chain.Result, error) {
		if n == 1 {
			return answer("fresh")
		}
		// The provider is down: the chain serves the stale answer it got.
		if req.Stale == nil {
			return chain.Result{Status: chain.StatusFailed}, &chain.ExhaustedError{}
		}
		return chain.Result{Status: chain.StatusOK, Content: req.Stale.Content, Provider: req.Stale.Provider, Cache: chain.CacheStale, Degraded: true}, nil
	}}
	store, _ := openStore(t)
	seen := &observed{}
	r, err := cache.New(cache.Config{Chain: "c", Next: next, Store: store, Observer: seen,
		Settings: cache.Settings{TTL: time.Minute, StaleTTL: time.Hour}, Providers: []string{"primary"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Run(t.Context(), new(cachedRequest("miss")))
	r.Run(t.Context(), new(cachedRequest("hit")))
	noCache := cachedRequest("stale")
	noCache.Cache.NoCache = true
	if res, err := r.Run(t.Context(), &noCache); err != nil || res.Cache != chain.CacheStale || res.Content != "fresh" {
		t.Fatalf("stale: %+v, %v; want the stored answer standing in", res, err)
	}

	want := []string{"c hit", "c miss", "c stale"}
	if got := seen.sorted(); !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
}

// observed records what a Runner tells its Observer.
type observed struct {
	mu   sync.Mutex
	seen []string
}

func (o *observed) Cache(chainName string, status chain.CacheStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, chainName+" "+string(status))
}

func (o *observed) sorted() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.seen))
}

// TestRunnerRecreatesADeletedBucket: after the bucket is deleted (nats kv
// rm), the next request is answered by the chain, finds the bucket gone,
// creates it again and stores its answer, which the request after it hits.
func TestRunnerRecreatesADeletedBucket(t *testing.T) {
	next := &nextFunc{run: func(_ context.Context, n int32, _ chain.Request) (chain.Result, error) {
		return answer(fmt.Sprintf("answer %d", n))
	}}
	store, js := openStore(t)
	r := newRunnerOn(t, store, next)
	if err := js.DeleteKeyValue(t.Context(), cache.Bucket); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context(), new(cachedRequest("a"))); err != nil || res.Cache != chain.CacheMiss || res.Content != "answer 1" {
		t.Fatalf("a: %+v, %v; want the chain's answer as a miss", res, err)
	}
	if _, err := js.KeyValue(t.Context(), cache.Bucket); err != nil {
		t.Fatalf("the bucket after a request found it gone: %v", err)
	}
	if res, err := r.Run(t.Context(), new(cachedRequest("b"))); err != nil || res.Cache != chain.CacheHit || res.Content != "answer 1" {
		t.Errorf("b: %+v, %v; want a hit on a's answer", res, err)
	}
	if got := next.runs.Load(); got != 1 {
		t.Errorf("chain ran %d times, want 1", got)
	}
}

// TestRunnerDoesNotServeAnInvalidEntry: an entry written by hand that is
// fresh by its times but invalid is not served: the request is a miss,
// one warning is logged, and its answer replaces the entry.
func TestRunnerDoesNotServeAnInvalidEntry(t *testing.T) {
	now := time.Now().UTC()
	good := entry("stored", now, time.Minute, time.Hour)
	for name, mutate := range map[string]func(e *cache.Entry){
		"empty content":      func(e *cache.Entry) { e.Content = "" },
		"stale before fresh": func(e *cache.Entry) { e.StaleUntil = e.FreshUntil.Add(-time.Second) },
		"negative usage":     func(e *cache.Entry) { e.Usage.PromptTokens = -5 },
		"no provider":        func(e *cache.Entry) { e.Provider = "" },
		"created in 2150": func(e *cache.Entry) {
			e.CreatedAt = time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC)
			e.FreshUntil, e.StaleUntil = e.CreatedAt.Add(time.Hour), e.CreatedAt.Add(2*time.Hour)
		},
	} {
		t.Run(name, func(t *testing.T) {
			next := &nextFunc{run: func(context.Context, int32, chain.Request) (chain.Result, error) { return answer("from the chain") }}
			store, js := openStore(t)
			var logged bytes.Buffer
			r, err := cache.New(cache.Config{Chain: "c", Next: next, Store: store, Settings: cache.Settings{TTL: time.Minute, StaleTTL: time.Hour},
				Providers: []string{"primary"}, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatal(err)
			}
			bad := good
			mutate(&bad)
			data, _ := json.Marshal(bad)
			if _, err := js.Publish(t.Context(), "$KV."+cache.Bucket+"."+cache.Key("c", "shared", "f00d"), data); err != nil {
				t.Fatal(err)
			}
			if res, err := r.Run(t.Context(), new(cachedRequest("a"))); err != nil || res.Cache != chain.CacheMiss || res.Content != "from the chain" {
				t.Fatalf("a: %+v, %v; want a miss answered by the chain", res, err)
			}
			if n := strings.Count(logged.String(), "level=WARN"); n != 1 || !strings.Contains(logged.String(), "invalid entry") {
				t.Errorf("logged %d warnings, want 1 about the invalid entry:\n%s", n, logged.String())
			}
			e, _, found, err := store.Get(t.Context(), cache.Key("c", "shared", "f00d"))
			if err != nil || !found || e.Content != "from the chain" {
				t.Errorf("stored after a: %+v, %v, %v; want a's answer over the invalid entry", e, found, err)
			}
			if res, _ := r.Run(t.Context(), new(cachedRequest("b"))); res.Cache != chain.CacheHit || res.Content != "from the chain" {
				t.Errorf("b: %+v, want a hit on a's answer", res)
			}
		})
	}
}

// TestRunnerSharedRunHitsAreShapedAsStoredHits: a request that shared
// another's run gets a hit shaped as a hit read from the bucket: its own
// id, "attempts": [] and no cost (the leader's call is the leader's).
func TestRunnerSharedRunHitsAreShapedAsStoredHits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	next := &nextFunc{run: func(_ context.Context, n int32, _ chain.Request) (chain.Result, error) {
		if n == 1 {
			close(entered)
			<-release
		}
		res, err := answer(fmt.Sprintf("answer %d", n))
		cost := 0.25
		res.Cost = &cost
		return res, err
	}}
	r := newRunner(t, next)
	// no_store: a follower that did not share the run would run the chain
	// itself (and the run count below would say so), not hit an entry.
	noStore := func(id string, fingerprinted chan<- struct{}) chain.Request {
		req := cachedRequest(id)
		req.Cache.NoStore = true
		req.Cache.Fingerprint = func() string {
			if fingerprinted != nil {
				close(fingerprinted)
			}
			return "f00d"
		}
		return req
	}
	var wg sync.WaitGroup
	var leader, follower chain.Result
	wg.Go(func() { leader, _ = r.Run(t.Context(), new(noStore("leader", nil))) })
	<-entered
	joining := make(chan struct{})
	wg.Go(func() { follower, _ = r.Run(t.Context(), new(noStore("follower", joining))) })
	<-joining
	time.Sleep(50 * time.Millisecond) // from its fingerprint to joining the run
	close(release)
	wg.Wait()
	if got := next.runs.Load(); got != 1 {
		t.Fatalf("chain ran %d times, want 1: the follower did not share the run", got)
	}
	if leader.Cache != chain.CacheMiss || leader.Cost == nil || len(leader.Attempts) != 1 {
		t.Errorf("leader: %+v, want a miss with its attempt and cost", leader)
	}

	// A hit read from the bucket, for comparison.
	r.Run(t.Context(), new(cachedRequest("store")))
	stored, _ := r.Run(t.Context(), new(cachedRequest("stored")))
	for name, res := range map[string]chain.Result{"follower": follower, "stored": stored} {
		data, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if res.Cache != chain.CacheHit || res.ID != name || !bytes.Contains(data, []byte(`"attempts":[]`)) || bytes.Contains(data, []byte(`"cost"`)) {
			t.Errorf("%s: %s; want a hit with its own id, \"attempts\": [] and no cost", name, data)
		}
	}
}
