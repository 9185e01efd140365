package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/cache"
	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// cachedChain is the chain file of the cache scenarios: chain "cached"
// with primary, calling primaryURL without retries or cooldowns, and a
// rules template, behind a cache of the given periods.
func cachedChain(primaryURL, cacheTTL, staleTTL string) string {
	return fmt.Sprintf(`
providers:
  - name: primary
    type: openai
    base_url: %s
    model: primary-model
    max_retries: 0
    failure_threshold: 0
  - name: template
    type: rules
    default_reply: "try again later"
chains:
  cached: {providers: [primary, template], cache_ttl: %s, stale_ttl: %s}
`, primaryURL, cacheTTL, staleTTL)
}

// wantCache checks a result's cache status, in its body and its header.
func wantCache(t *testing.T, id string, res chain.Result, header map[string][]string, want chain.CacheStatus) {
	t.Helper()
	if res.Cache != want || wire.HeaderCache != "Detour-Cache" || first(header[wire.HeaderCache]) != string(want) {
		t.Errorf("%s: cache %q, header Detour-Cache %q; want %q in both", id, res.Cache, header[wire.HeaderCache], want)
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// cacheEntries returns the entries stored in the cache bucket, by key.
func (h *harness) cacheEntries() map[string]cache.Entry {
	h.t.Helper()
	ctx := context.Background()
	kv, err := h.js.KeyValue(ctx, cache.Bucket)
	if err != nil {
		h.t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]cache.Entry{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			h.t.Fatal(err)
		}
		var entry cache.Entry
		if err := json.Unmarshal(e.Value(), &entry); err != nil {
			h.t.Fatal(err)
		}
		out[k] = entry
	}
	return out
}

// cacheMessages is how many messages the cache bucket's stream holds:
// entries, and the markers of deleted or expired ones.
func (h *harness) cacheMessages() uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), "KV_"+cache.Bucket)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Msgs
}

// TestCacheHitAnswersAnIdenticalRequestWithoutACall is acceptance 1: two
// identical requests within cache_ttl make one provider call, and the
// second is a hit with the original provider and model.
func TestCacheHitAnswersAnIdenticalRequestWithoutACall(t *testing.T) {
	h, primary := startCached(t, "10m", "24h", providertest.OK())

	h.publish("cached", request("first", "hello"))
	res, header := h.waitResult("first", 10*time.Second)
	if res.Status != chain.StatusOK || res.Provider != "primary" || res.AgeS != 0 || len(res.Attempts) != 1 {
		t.Fatalf("first: %+v, want ok from primary after one attempt", res)
	}
	wantCache(t, "first", res, header, chain.CacheMiss)

	h.publish("cached", request("second", "hello"))
	hit, header := h.waitResult("second", 10*time.Second)
	wantCache(t, "second", hit, header, chain.CacheHit)
	if hit.Status != chain.StatusOK || hit.Content != res.Content || hit.Provider != "primary" || hit.Model != "primary-model" ||
		hit.Degraded || len(hit.Attempts) != 0 || hit.ID != "second" || header.Get(wire.HeaderProvider) != "primary" {
		t.Errorf("second: %+v, want the first's answer from primary, with no attempts", hit)
	}
	if got := primary.Requests(); got != 1 {
		t.Errorf("primary received %d requests, want 1", got)
	}
}

// TestCacheKeepsDifferentRequestsApart is acceptance 2: requests that
// differ only in temperature, max_tokens, the system message,
// response_schema or cache_scope never share an entry.
func TestCacheKeepsDifferentRequestsApart(t *testing.T) {
	h, primary := startCached(t, "10m", "24h", providertest.JSON(map[string]string{"answer": "yes"}))

	base := func(id string) wire.Request {
		temp := 0.2
		return wire.Request{ID: id, Messages: []chain.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
			MaxTokens: 50, Temperature: &temp}
	}
	variants := map[string]func(*wire.Request){
		"base":        func(*wire.Request) {},
		"temperature": func(r *wire.Request) { v := 0.9; r.Temperature = &v },
		"max_tokens":  func(r *wire.Request) { r.MaxTokens = 51 },
		"system":      func(r *wire.Request) { r.Messages[0].Content = "be thorough" },
		"schema": func(r *wire.Request) {
			r.ResponseSchema = map[string]any{"type": "object", "required": []any{"answer"}}
		},
		"scope": func(r *wire.Request) { r.CacheScope = "tenant-2" },
	}
	// Each variant once: each a miss. Then each again: each a hit on its
	// own entry, answered with no further call.
	for round, want := range []chain.CacheStatus{chain.CacheMiss, chain.CacheHit} {
		for name, change := range variants {
			req := base(fmt.Sprintf("%s-%d", name, round))
			change(&req)
			h.publish("cached", req)
			res, header := h.waitResult(req.ID, 10*time.Second)
			wantCache(t, req.ID, res, header, want)
		}
	}
	if got, want := primary.Requests(), len(variants); got != want {
		t.Errorf("primary received %d requests, want %d (one per variant)", got, want)
	}
	if got := len(h.cacheEntries()); got != len(variants) {
		t.Errorf("%d entries stored, want %d", got, len(variants))
	}
}

// TestCacheStaleAnswerWhenEveryProviderIsDown is acceptance 3: with the
// provider dead, an entry past cache_ttl but within stale_ttl answers,
// degraded and "stale"; past stale_ttl the rules reply answers.
func TestCacheStaleAnswerWhenEveryProviderIsDown(t *testing.T) {
	h, primary := startCached(t, "1s", "3s", providertest.OK())

	h.publish("cached", request("warm", "hello"))
	warm, _ := h.waitResult("warm", 10*time.Second)
	entries := h.cacheEntries()
	if len(entries) != 1 {
		t.Fatalf("%d entries after the first answer, want 1", len(entries))
	}
	var entry cache.Entry
	for _, e := range entries {
		entry = e
	}
	if entry.Content != warm.Content || entry.Provider != "primary" || entry.StaleUntil.Sub(entry.FreshUntil) != 3*time.Second {
		t.Fatalf("entry %+v, want primary's answer, stale 3s after fresh", entry)
	}
	primary.SetScript(providertest.Status(503))

	time.Sleep(time.Until(entry.FreshUntil.Add(50 * time.Millisecond)))
	h.publish("cached", request("stale", "hello"))
	stale, header := h.waitResult("stale", 10*time.Second)
	wantCache(t, "stale", stale, header, chain.CacheStale)
	if stale.Status != chain.StatusOK || !stale.Degraded || stale.Content != warm.Content || stale.Provider != "primary" ||
		stale.AgeS < 1 || header.Get(wire.HeaderDegraded) != "true" {
		t.Errorf("stale: %+v, want primary's earlier answer, degraded, at least 1s old", stale)
	}
	if len(stale.Attempts) != 1 || stale.Attempts[0].Class != chain.ClassServer {
		t.Errorf("stale: attempts %+v, want primary's failure", stale.Attempts)
	}

	time.Sleep(time.Until(entry.StaleUntil.Add(50 * time.Millisecond)))
	h.publish("cached", request("late", "hello"))
	late, header := h.waitResult("late", 10*time.Second)
	if late.Status != chain.StatusOK || late.Provider != "template" || late.Content != "try again later" {
		t.Errorf("late: %+v, want the rules reply", late)
	}
	wantCache(t, "late", late, header, chain.CacheMiss)
	if got := primary.Requests(); got != 3 {
		t.Errorf("primary received %d requests, want 3", got)
	}
}

// TestCacheStaleIfErrorZeroTurnsStaleAnswersOff: a request may refuse a
// stale answer, and gets the rules reply.
func TestCacheStaleIfErrorZeroTurnsStaleAnswersOff(t *testing.T) {
	h, primary := startCached(t, "1h", "24h", providertest.OK())

	h.publish("cached", request("warm", "hello"))
	h.waitResult("warm", 10*time.Second)
	primary.SetScript(providertest.Status(503))

	// no_cache skips the fresh entry; the dead provider leaves the entry
	// to stand in, unless stale_if_error is 0.
	for _, tc := range []struct {
		id    string
		stale *int64
		want  string
	}{{"off", new(int64(0)), "template"}, {"on", nil, "primary"}} {
		req := request(tc.id, "hello")
		req.Cache = &wire.CacheControl{NoCache: true, StaleIfError: tc.stale}
		h.publish("cached", req)
		res, _ := h.waitResult(tc.id, 10*time.Second)
		if res.Provider != tc.want {
			t.Errorf("%s: answered by %s (cache %q), want %s", tc.id, res.Provider, res.Cache, tc.want)
		}
	}
}

// TestCacheNeverStoresWhatMustNotBeKept is acceptance 4: a rules reply, a
// truncated answer and a no_store request leave no entry.
func TestCacheNeverStoresWhatMustNotBeKept(t *testing.T) {
	h, primary := startCached(t, "10m", "24h", providertest.Status(503))

	h.publish("cached", request("rules", "hello"))
	if res, _ := h.waitResult("rules", 10*time.Second); res.Provider != "template" {
		t.Fatalf("rules: answered by %s, want template", res.Provider)
	}

	primary.SetScript(providertest.Truncated())
	h.publish("cached", request("truncated", "hello"))
	res, _ := h.waitResult("truncated", 10*time.Second)
	if res.Provider != "template" || len(res.Attempts) != 2 || res.Attempts[0].Class != chain.ClassInvalidOutput {
		t.Fatalf("truncated: %+v, want primary's truncated answer refused, then the rules reply", res)
	}

	// An answer that died midway is no answer (docs/failures.md, stop
	// reasons): its fragment is never stored, nor served as a hit.
	primary.SetScript(providertest.DiedMidAnswer("The three primary colours of light are red, gre", 502))
	h.publish("cached", request("died", "hello"))
	res, _ = h.waitResult("died", 10*time.Second)
	if res.Provider != "template" || len(res.Attempts) != 2 || res.Attempts[0].Class != chain.ClassServer || res.Attempts[0].StopReason != "error" {
		t.Fatalf("died: %+v, want primary's fragment refused as server with stop reason error, then the rules reply", res)
	}

	primary.SetScript(providertest.OK())
	req := request("no-store", "hello")
	req.Cache = &wire.CacheControl{NoStore: true}
	h.publish("cached", req)
	if res, _ := h.waitResult("no-store", 10*time.Second); res.Provider != "primary" || res.Cache != chain.CacheMiss {
		t.Fatalf("no-store: %+v, want a miss answered by primary", res)
	}

	if n := h.cacheMessages(); n != 0 {
		t.Errorf("the cache bucket holds %d messages, want none", n)
	}
	h.publish("cached", request("after", "hello"))
	if res, _ := h.waitResult("after", 10*time.Second); res.Cache != chain.CacheMiss || primary.Requests() != 5 {
		t.Errorf("after: cache %q with %d primary requests, want a miss calling primary a fifth time", res.Cache, primary.Requests())
	}
}

// TestCacheConcurrentIdenticalMissesMakeOneCall is acceptance 5: 50
// identical requests on a cold cache make one provider call.
func TestCacheConcurrentIdenticalMissesMakeOneCall(t *testing.T) {
	primary := providertest.New(providertest.OpenAI, providertest.Slow(200*time.Millisecond, providertest.OK()))
	defer primary.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.Workers = 64
	h.startProcessor(parseChainFile(t, cachedChain(primary.URL, "10m", "24h")), settings)

	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { h.publish("cached", request(fmt.Sprintf("c-%d", i), "same question")) })
	}
	wg.Wait()
	counts := map[chain.CacheStatus]int{}
	for i := range n {
		res, _ := h.waitResult(fmt.Sprintf("c-%d", i), 20*time.Second)
		if res.Status != chain.StatusOK || res.Provider != "primary" {
			t.Fatalf("c-%d: %+v, want ok from primary", i, res)
		}
		counts[res.Cache]++
	}
	if got := primary.Requests(); got != 1 {
		t.Errorf("primary received %d requests, want 1", got)
	}
	if counts[chain.CacheMiss] != 1 || counts[chain.CacheHit] != n-1 {
		t.Errorf("cache statuses %v, want one miss and %d hits", counts, n-1)
	}
}

// TestCacheCostsOneReadAndAtMostOneWrite counts, on the server, the
// cache's reads (direct gets on its stream) and writes (publishes to its
// keys): a miss reads once and writes once, a hit reads once, a no_store
// miss reads once.
func TestCacheCostsOneReadAndAtMostOneWrite(t *testing.T) {
	h, _ := startCached(t, "10m", "24h", providertest.OK())
	reads, err := h.nc.SubscribeSync("$JS.API.DIRECT.GET.KV_" + cache.Bucket + ".>")
	if err != nil {
		t.Fatal(err)
	}
	msgGets, err := h.nc.SubscribeSync("$JS.API.STREAM.MSG.GET.KV_" + cache.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	writes, err := h.nc.SubscribeSync("$KV." + cache.Bucket + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	counted := func() (int, int) {
		t.Helper()
		if err := h.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		r, _, _ := reads.Pending()
		g, _, _ := msgGets.Pending()
		w, _, _ := writes.Pending()
		return r + g, w
	}

	// Counts are totals: each step adds at most one read and one write.
	for _, step := range []struct {
		id            string
		status        chain.CacheStatus
		noStore       bool
		reads, writes int
	}{{"miss", chain.CacheMiss, false, 1, 1}, {"hit", chain.CacheHit, false, 2, 1}, {"no-store", chain.CacheMiss, true, 3, 1}} {
		req := request(step.id, "hello")
		if step.noStore {
			req.Messages[0].Content = "something else"
			req.Cache = &wire.CacheControl{NoStore: true}
		}
		h.publish("cached", req)
		res, _ := h.waitResult(step.id, 10*time.Second)
		if res.Cache != step.status {
			t.Fatalf("%s: cache %q, want %q", step.id, res.Cache, step.status)
		}
		if r, w := counted(); r != step.reads || w != step.writes {
			t.Errorf("after %s: %d reads and %d writes in all, want %d and %d", step.id, r, w, step.reads, step.writes)
		}
	}
}

// TestCacheBadControlsAreDeadLettered: a request with a bad cache field or
// cache_scope is a bad_request, dead-lettered with the reason and answered
// with a failed result saying it.
func TestCacheBadControlsAreDeadLettered(t *testing.T) {
	h, primary := startCached(t, "10m", "24h", providertest.OK())

	cases := map[string]struct{ body, want string }{
		"bad-key":   {`{"id":"bad-key","messages":[{"role":"user","content":"hi"}],"cache":{"nocache":true}}`, `cache has no key "nocache"; did you mean "no_cache"?`},
		"bad-kind":  {`{"id":"bad-kind","messages":[{"role":"user","content":"hi"}],"cache":{"stale_if_error":"1m"}}`, `cache.stale_if_error must be a whole number of seconds`},
		"bad-scope": {`{"id":"bad-scope","messages":[{"role":"user","content":"hi"}],"cache_scope":"a.b"}`, `cache_scope "a.b" must be one token`},
	}
	for id, c := range cases {
		h.publishRaw("cached", []byte(c.body), nil)
		res, _ := h.waitResult(id, 10*time.Second)
		if res.Status != chain.StatusFailed || !strings.HasPrefix(res.Error, "bad_request: ") || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: result %s %q, want failed saying %q", id, res.Status, res.Error, c.want)
		}
	}
	letters := h.deadLetters()
	if len(letters) != len(cases) {
		t.Fatalf("%d dead letters, want %d", len(letters), len(cases))
	}
	for _, dl := range letters {
		if dl.Header.Get(deadletter.HeaderReason) != string(deadletter.ReasonBadRequest) || dl.Header.Get(deadletter.HeaderError) == "" {
			t.Errorf("dead letter headers %v, want reason bad_request with the error", dl.Header)
		}
	}
	if got := primary.Requests(); got != 0 {
		t.Errorf("primary received %d requests, want none", got)
	}
}

// TestCacheBucketDeletedWhileRunningIsCreatedAgain: after the bucket is
// deleted under a running processor (nats kv rm detour_cache), the next
// request is answered as a miss and recreates the bucket with its
// answer, so the request after it is a hit: the cache does not stay off
// until a restart.
func TestCacheBucketDeletedWhileRunningIsCreatedAgain(t *testing.T) {
	h, primary := startCached(t, "10m", "24h", providertest.OK())

	h.publish("cached", request("before", "hello"))
	res, header := h.waitResult("before", 10*time.Second)
	wantCache(t, "before", res, header, chain.CacheMiss)
	if err := h.js.DeleteKeyValue(context.Background(), cache.Bucket); err != nil {
		t.Fatal(err)
	}

	h.publish("cached", request("after-rm", "hello"))
	res, header = h.waitResult("after-rm", 10*time.Second)
	if res.Status != chain.StatusOK || res.Provider != "primary" {
		t.Fatalf("after-rm: %+v, want ok from primary", res)
	}
	wantCache(t, "after-rm", res, header, chain.CacheMiss)
	if got := len(h.cacheEntries()); got != 1 {
		t.Errorf("%d entries in the recreated bucket, want after-rm's", got)
	}

	h.publish("cached", request("again", "hello"))
	res, header = h.waitResult("again", 10*time.Second)
	wantCache(t, "again", res, header, chain.CacheHit)
	if got := primary.Requests(); got != 2 {
		t.Errorf("primary received %d requests, want 2 (before, after-rm)", got)
	}
}

// startCached starts a processor whose chain "cached" has one OpenAI
// provider playing script, with cache_ttl ttl and stale_ttl stale; the
// provider closes when the test ends.
func startCached(t *testing.T, ttl, stale string, script providertest.Script) (*harness, *providertest.Server) {
	t.Helper()
	primary := providertest.New(providertest.OpenAI, script)
	t.Cleanup(primary.Close)
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, cachedChain(primary.URL, ttl, stale)), testSettings())
	return h, primary
}
