package chain_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// memState is an in-memory chain.State: it counts consecutive counted
// failures per provider and opens a cooldown when they reach the policy's
// FailureThreshold, or at once when a failure asks for one (CooldownFor). It
// records every call so tests can assert what the chain told the state.
type memState struct {
	mu          sync.Mutex
	consecutive map[string]int
	until       map[string]time.Time
	calls       []stateCall
}

// stateCall is one call the chain made on the state.
type stateCall struct {
	Op       string // "cooling", "failure" or "success"
	Provider string
	Failure  chain.Failure // set for "failure"
}

func newMemState() *memState {
	return &memState{consecutive: map[string]int{}, until: map[string]time.Time{}}
}

func (s *memState) Admit(_ context.Context, provider string, now time.Time, _ time.Duration) chain.Admission {
	if until, cooling := s.Cooling(provider, now); cooling {
		return chain.Admission{Until: until}
	}
	return chain.Admission{Allowed: true}
}

func (s *memState) ReleaseProbe(context.Context, string, uint64) error { return nil }

func (s *memState) Cooling(provider string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, stateCall{Op: "cooling", Provider: provider})
	until, ok := s.until[provider]
	return until, ok && now.Before(until)
}

func (s *memState) RecordFailure(_ context.Context, provider string, f chain.Failure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, stateCall{Op: "failure", Provider: provider, Failure: f})
	s.consecutive[provider]++
	switch {
	case f.CooldownFor > 0:
		s.until[provider] = f.At.Add(f.CooldownFor)
	case f.Policy.FailureThreshold > 0 && s.consecutive[provider] >= f.Policy.FailureThreshold:
		s.until[provider] = f.At.Add(f.Policy.Cooldown)
	}
	return nil
}

func (s *memState) RecordSuccess(_ context.Context, provider string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, stateCall{Op: "success", Provider: provider})
	s.consecutive[provider] = 0
	return nil
}

// open starts a cooldown by hand, as another processor would have.
func (s *memState) open(provider string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.until[provider] = until
}

// failures returns the failures recorded for provider, in order.
func (s *memState) failures(provider string) []chain.Failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []chain.Failure
	for _, c := range s.calls {
		if c.Op == "failure" && c.Provider == provider {
			out = append(out, c.Failure)
		}
	}
	return out
}

// allFailures is the number of RecordFailure calls for any provider.
func (s *memState) allFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Op == "failure" {
			n++
		}
	}
	return n
}

var _ chain.State = (*memState)(nil)

// hello is the request most scenarios send.
var hello = chain.Request{ID: "req-1", Messages: []chain.Message{{Role: "user", Content: "hello"}}}

// fakeProvider starts a providertest server running script and returns a
// chain step calling it through the real OpenAI adapter, with model
// "model-<name>" and API key "key-<name>".
func fakeProvider(t *testing.T, name string, script providertest.Script, pol chain.Policy) (chain.Step, *providertest.Server) {
	t.Helper()
	srv := providertest.New(providertest.OpenAI, script)
	t.Cleanup(srv.Close)
	return chain.Step{Provider: chain.NewOpenAI(name, srv.URL, "model-"+name, "key-"+name, nil), Policy: pol}, srv
}

// newChain builds a chain whose jitter is always zero, so retries without a
// Retry-After follow at once and tests do not sleep.
func newChain(state chain.State, steps ...chain.Step) *chain.Chain {
	return &chain.Chain{Name: "test", Steps: steps, State: state, Rand: func() float64 { return 0 }}
}

// trail summarises the attempts as "provider outcome class status", in order.
func trail(res chain.Result) []string {
	out := make([]string, len(res.Attempts))
	for i, a := range res.Attempts {
		out[i] = fmt.Sprintf("%s %s %s %d", a.Provider, a.Outcome, a.Class, a.StatusCode)
	}
	return out
}

func wantTrail(t *testing.T, res chain.Result, want ...string) {
	t.Helper()
	if got := trail(res); !slices.Equal(got, want) {
		t.Errorf("attempts:\n got  %q\n want %q", got, want)
	}
}

func wantAnswer(t *testing.T, res chain.Result, err error, provider string, position int) {
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v (attempts %q)", err, trail(res))
	}
	if res.Status != chain.StatusOK || res.Provider != provider || res.Position != position || res.Degraded != (position > 0) {
		t.Errorf("result: status %s, provider %q, position %d, degraded %v; want ok, %q, %d, %v",
			res.Status, res.Provider, res.Position, res.Degraded, provider, position, position > 0)
	}
}

func wantRequests(t *testing.T, name string, srv *providertest.Server, want int) {
	t.Helper()
	if got := srv.Requests(); got != want {
		t.Errorf("%s received %d requests, want %d", name, got, want)
	}
}

func TestFirstProviderAnswersWithoutDegrading(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.OK(), chain.Policy{})
	backup, backupSrv := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "primary", 0)
	if res.Content != "model-primary answers: hello" || res.Model != "model-primary" {
		t.Errorf("content %q, model %q", res.Content, res.Model)
	}
	// providertest counts words: one in the prompt, three in the answer.
	if want := (chain.Usage{PromptTokens: 1, CompletionTokens: 3}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if res.ID != hello.ID {
		t.Errorf("id %q, want %q", res.ID, hello.ID)
	}
	wantTrail(t, res, "primary ok  0")
	wantRequests(t, "primary", primarySrv, 1)
	wantRequests(t, "backup", backupSrv, 0)
}

func TestServerErrorIsRetriedMaxRetriesTimesThenFallsBack(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Status(http.StatusInternalServerError),
		chain.Policy{MaxRetries: 4, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 5)
	wantTrail(t, res,
		"primary failed server 500",
		"primary failed server 500",
		"primary failed server 500",
		"primary failed server 500",
		"primary failed server 500",
		"backup ok  0")
	if got := len(state.failures("primary")); got != 5 {
		t.Errorf("RecordFailure called %d times for primary, want 5", got)
	}
	// Each failure says when its attempt began, so that one in flight when
	// a cooldown opened escalates nothing.
	for i, f := range state.failures("primary") {
		if f.Started.IsZero() || f.Started.After(f.At) {
			t.Errorf("failure %d: started %v, at %v; want its attempt's start, not after it", i, f.Started, f.At)
		}
	}
}

// TestCooldownOpenedMidPassStopsPlannedRetries: once the request's own
// failures trip the threshold, the retries it still had planned are dropped.
func TestCooldownOpenedMidPassStopsPlannedRetries(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Status(http.StatusBadGateway), chain.Policy{
		MaxRetries: 4,
		Cooldown:   chain.CooldownPolicy{FailureThreshold: 2, Cooldown: time.Minute},
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 2)
	wantTrail(t, res, "primary failed server 502", "primary failed server 502", "backup ok  0")
	if _, cooling := state.Cooling("primary", time.Now()); !cooling {
		t.Error("primary is not cooling after reaching the threshold")
	}
}

func TestCoolingProviderIsSkippedWithoutACall(t *testing.T) {
	t.Parallel()
	state := newMemState()
	state.open("primary", time.Now().Add(time.Minute))
	primary, primarySrv := fakeProvider(t, "primary", providertest.OK(), chain.Policy{})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 0)
	wantTrail(t, res, "primary skipped cooldown 0", "backup ok  0")
}

func TestAllCoolingIsExhaustedWithEarliestReopen(t *testing.T) {
	t.Parallel()
	state := newMemState()
	now := time.Now()
	state.open("primary", now.Add(5*time.Minute))
	state.open("backup", now.Add(2*time.Minute))
	primary, primarySrv := fakeProvider(t, "primary", providertest.OK(), chain.Policy{})
	backup, backupSrv := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	var ex *chain.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("Run error = %v, want *ExhaustedError", err)
	}
	if !errors.Is(err, chain.ErrExhausted) {
		t.Error("errors.Is(err, ErrExhausted) = false")
	}
	if !ex.AllCooling || ex.Poison {
		t.Errorf("AllCooling %v, Poison %v; want true, false", ex.AllCooling, ex.Poison)
	}
	if !ex.ReopenAt.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("ReopenAt %v, want the earliest until %v", ex.ReopenAt, now.Add(2*time.Minute))
	}
	if res.Status != chain.StatusFailed || res.Error == "" {
		t.Errorf("result status %s, error %q; want failed with an error", res.Status, res.Error)
	}
	wantTrail(t, res, "primary skipped cooldown 0", "backup skipped cooldown 0")
	wantRequests(t, "primary", primarySrv, 0)
	wantRequests(t, "backup", backupSrv, 0)
}

func TestBadRequestIsNeitherRetriedNorCounted(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Status(http.StatusBadRequest), chain.Policy{
		MaxRetries: 3,
		Cooldown:   chain.CooldownPolicy{FailureThreshold: 1, Cooldown: time.Minute},
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 1)
	wantTrail(t, res, "primary failed request 400", "backup ok  0")
	if got := state.allFailures(); got != 0 {
		t.Errorf("RecordFailure called %d times, want 0: a bad request is not an outage", got)
	}
}

func TestPoisonRequestIsNotAnsweredByRules(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusBadRequest), chain.Policy{MaxRetries: 2})
	backup, _ := fakeProvider(t, "backup", providertest.Status(http.StatusUnprocessableEntity), chain.Policy{MaxRetries: 2})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}

	res, err := newChain(state, primary, backup, template).Run(context.Background(), &hello)

	var ex *chain.ExhaustedError
	if !errors.As(err, &ex) || !ex.Poison || ex.AllCooling {
		t.Fatalf("Run error = %#v, want *ExhaustedError with Poison", err)
	}
	if !errors.Is(err, chain.ErrExhausted) {
		t.Error("errors.Is(err, ErrExhausted) = false")
	}
	if res.Status != chain.StatusFailed || res.Content != "" {
		t.Errorf("result status %s, content %q; want failed and empty", res.Status, res.Content)
	}
	wantTrail(t, res, "primary failed request 400", "backup failed request 422")
	if !slices.Equal(ex.Rejected, []string{"primary", "backup"}) || !strings.Contains(ex.Error(), "(primary, backup)") {
		t.Errorf("Rejected %q, error %q; want both providers named as having judged it", ex.Rejected, ex.Error())
	}
}

// TestARejectionWhileOthersCoolIsUndecided: a request the providers called
// rejected, while another that could take it is cooling, is not poison
// yet: the run ends Undecided, waiting for that provider's reopen, and the
// rules provider does not answer it; with or without a rules provider.
func TestARejectionWhileOthersCoolIsUndecided(t *testing.T) {
	t.Parallel()
	for _, withTemplate := range []bool{true, false} {
		state := newMemState()
		reopen := time.Now().Add(3 * time.Minute)
		state.open("backup", reopen)
		primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusBadRequest), chain.Policy{})
		backup, backupSrv := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})
		steps := []chain.Step{primary, backup}
		if withTemplate {
			steps = append(steps, chain.Step{Provider: chain.NewRules("template", nil, "try again later")})
		}

		res, err := newChain(state, steps...).Run(context.Background(), &hello)

		var ex *chain.ExhaustedError
		if !errors.As(err, &ex) || !ex.Undecided || ex.Poison || ex.AllCooling || ex.InvalidOutput {
			t.Fatalf("template %v: Run error = %#v, want *ExhaustedError Undecided only", withTemplate, err)
		}
		if !ex.ReopenAt.Equal(reopen) || !slices.Equal(ex.Rejected, []string{"primary"}) {
			t.Errorf("template %v: ReopenAt %v, Rejected %q; want backup's reopen %v and primary", withTemplate, ex.ReopenAt, ex.Rejected, reopen)
		}
		if res.Status != chain.StatusFailed || res.Content != "" {
			t.Errorf("template %v: result %s %q; want failed and empty", withTemplate, res.Status, res.Content)
		}
		wantTrail(t, res, "primary failed request 400", "backup skipped cooldown 0")
		wantRequests(t, "backup", backupSrv, 0)
	}
}

// TestARejectionBesideAnOutageIsAnsweredByRules: when one provider rejects
// the request and another fails for an outage, the request is no poison,
// and the rules provider answers the outage as ever.
func TestARejectionBesideAnOutageIsAnsweredByRules(t *testing.T) {
	t.Parallel()
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusBadRequest), chain.Policy{})
	backup, _ := fakeProvider(t, "backup", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}

	res, err := newChain(newMemState(), primary, backup, template).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "template", 2)
	wantTrail(t, res, "primary failed request 400", "backup failed server 503", "template ok  0")
}

func TestExhaustedErrorUnwrapsToLastFailure(t *testing.T) {
	t.Parallel()
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	backup, _ := fakeProvider(t, "backup", providertest.Status(http.StatusUnprocessableEntity), chain.Policy{})

	_, err := newChain(newMemState(), primary, backup).Run(context.Background(), &hello)

	if !errors.Is(err, chain.ErrExhausted) {
		t.Fatalf("Run error = %v, want it to match ErrExhausted", err)
	}
	var ce *chain.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(%v, *CallError) = false, want the last provider's failure", err)
	}
	if ce.Class != chain.ClassRequest || ce.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("unwrapped failure class %s, status %d; want request, 422 (the backup's)", ce.Class, ce.StatusCode)
	}
}

func TestAllCoolingExhaustedErrorUnwrapsToNothing(t *testing.T) {
	t.Parallel()
	state := newMemState()
	state.open("primary", time.Now().Add(time.Minute))
	primary, _ := fakeProvider(t, "primary", providertest.OK(), chain.Policy{})

	_, err := newChain(state, primary).Run(context.Background(), &hello)

	var ex *chain.ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("Run error = %v, want *ExhaustedError", err)
	}
	if got := ex.Unwrap(); got != nil {
		t.Errorf("Unwrap() = %v, want nil: no provider was called", got)
	}
}

func TestOutageIsAnsweredByRulesTemplate(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	backup, _ := fakeProvider(t, "backup", providertest.Status(529), chain.Policy{})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}

	res, err := newChain(state, primary, backup, template).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "template", 2)
	if res.Model != chain.RulesModel || res.Content != "try again later" {
		t.Errorf("model %q, content %q; want %q, the default reply", res.Model, res.Content, chain.RulesModel)
	}
	wantTrail(t, res, "primary failed server 503", "backup failed server 529", "template ok  0")
}

func TestAuthFailureOpensAuthCooldownWithoutRetry(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Status(http.StatusUnauthorized), chain.Policy{
		MaxRetries: 3,
		Cooldown:   chain.CooldownPolicy{FailureThreshold: 5, Cooldown: time.Minute, AuthCooldown: time.Hour},
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 1)
	wantTrail(t, res, "primary failed auth 401", "backup ok  0")
	failures := state.failures("primary")
	if len(failures) != 1 || failures[0].Class != chain.ClassAuth || failures[0].CooldownFor != time.Hour {
		t.Errorf("recorded failures %+v, want one auth failure with CooldownFor 1h", failures)
	}
}

func TestRateLimitRetriesAfterRetryAfter(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		arrivals []time.Time
	)
	script := func(n int, req providertest.Request) providertest.Reply {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		if n == 1 {
			return providertest.RateLimited("1")(n, req)
		}
		return providertest.OK()(n, req)
	}
	state := newMemState()
	primary, _ := fakeProvider(t, "primary", script, chain.Policy{
		MaxRetries:   1,
		MaxRetryWait: 10 * time.Second,
		Cooldown:     chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute},
	})

	res, err := newChain(state, primary).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "primary", 0)
	wantTrail(t, res, "primary failed rate_limit 429", "primary ok  0")
	if res.Attempts[0].RetryAfterMs != 1000 {
		t.Errorf("first attempt retry_after_ms = %d, want 1000", res.Attempts[0].RetryAfterMs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(arrivals))
	}
	if gap := arrivals[1].Sub(arrivals[0]); gap < time.Second {
		t.Errorf("retry arrived %v after the 429, want at least 1s", gap)
	}
	if failures := state.failures("primary"); len(failures) != 1 || failures[0].CooldownFor != 0 {
		t.Errorf("recorded failures %+v, want one without CooldownFor", failures)
	}
}

func TestLongRetryAfterOpensCooldownInsteadOfWaiting(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.RateLimited("120"), chain.Policy{
		MaxRetries:   3,
		MaxRetryWait: 10 * time.Second,
		Cooldown:     chain.CooldownPolicy{FailureThreshold: 5, Cooldown: time.Minute},
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 1)
	wantTrail(t, res, "primary failed rate_limit 429", "backup ok  0")
	failures := state.failures("primary")
	if len(failures) != 1 || failures[0].Class != chain.ClassRateLimit || failures[0].CooldownFor != 120*time.Second {
		t.Errorf("recorded failures %+v, want one rate_limit failure with CooldownFor 120s", failures)
	}
}

// TestLongRetryAfterOnServerErrorDoesNotSleep: a 503 carrying a Retry-After
// beyond MaxRetryWait must not hold the request for that long; the pass ends
// and the next provider answers.
func TestLongRetryAfterOnServerErrorDoesNotSleep(t *testing.T) {
	t.Parallel()
	state := newMemState()
	unavailable := func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"3600"}}}
	}
	primary, primarySrv := fakeProvider(t, "primary", unavailable, chain.Policy{
		MaxRetries:   3,
		MaxRetryWait: 10 * time.Second,
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	done := make(chan struct{})
	var (
		res chain.Result
		err error
	)
	go func() {
		defer close(done)
		res, err = newChain(state, primary, backup).Run(context.Background(), &hello)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run still waiting 10s after a 503 with Retry-After: 3600")
	}
	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 1)
}

func TestInvalidOutputMovesOnWithoutCounting(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]providertest.Script{
		"empty":     providertest.Empty(),
		"truncated": providertest.Truncated(),
		"malformed": providertest.Malformed(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			state := newMemState()
			primary, primarySrv := fakeProvider(t, "primary", script, chain.Policy{
				MaxRetries: 2,
				Cooldown:   chain.CooldownPolicy{FailureThreshold: 1, Cooldown: time.Minute},
			})
			backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

			res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

			wantAnswer(t, res, err, "backup", 1)
			wantRequests(t, "primary", primarySrv, 1)
			if a := res.Attempts[0]; a.Provider != "primary" || a.Class != chain.ClassInvalidOutput {
				t.Errorf("first attempt %+v, want primary invalid_output", a)
			}
			if got := state.allFailures(); got != 0 {
				t.Errorf("RecordFailure called %d times, want 0", got)
			}
		})
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Hang(), chain.Policy{
		Timeout:    100 * time.Millisecond,
		MaxRetries: 1,
	})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 2)
	wantTrail(t, res, "primary failed timeout 0", "primary failed timeout 0", "backup ok  0")
	if got := len(state.failures("primary")); got != 2 {
		t.Errorf("RecordFailure called %d times for primary, want 2", got)
	}
}

func TestRefusedConnectionIsNetwork(t *testing.T) {
	t.Parallel()
	closed := providertest.New(providertest.OpenAI, nil)
	closed.Close()
	state := newMemState()
	primary := chain.Step{
		Provider: chain.NewOpenAI("primary", closed.URL, "model-primary", "key-primary", nil),
		Policy:   chain.Policy{MaxRetries: 1},
	}
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantTrail(t, res, "primary failed network 0", "primary failed network 0", "backup ok  0")
	if got := len(state.failures("primary")); got != 2 {
		t.Errorf("RecordFailure called %d times for primary, want 2", got)
	}
}

func TestCancelDuringCallReturnsPromptlyWithoutExhausting(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, primarySrv := fakeProvider(t, "primary", providertest.Hang(), chain.Policy{MaxRetries: 3})
	backup, backupSrv := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	canceledAt := make(chan time.Time, 1)
	go func() {
		// Cancel once the call is hanging on the server, not before (but
		// give up waiting after 5s so a broken run cannot hang the test).
		for give := time.Now().Add(5 * time.Second); primarySrv.InFlight() == 0 && time.Now().Before(give); {
			time.Sleep(5 * time.Millisecond)
		}
		canceledAt <- time.Now()
		cancel()
	}()

	res, err := newChain(state, primary, backup).Run(ctx, &hello)
	returned := time.Now()

	if err == nil {
		t.Fatal("Run returned no error after cancellation")
	}
	var ex *chain.ExhaustedError
	if errors.As(err, &ex) || errors.Is(err, chain.ErrExhausted) {
		t.Errorf("Run error = %v; a canceled run is not exhausted", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error = %v, want it to wrap context.Canceled", err)
	}
	if elapsed := returned.Sub(<-canceledAt); elapsed > 2*time.Second {
		t.Errorf("Run returned %v after cancel, want within 2s", elapsed)
	}
	if n := len(res.Attempts); n == 0 || res.Attempts[n-1].Class != chain.ClassCanceled {
		t.Errorf("attempts %q, want the last one canceled", trail(res))
	}
	wantRequests(t, "backup", backupSrv, 0)
	if got := state.allFailures(); got != 0 {
		t.Errorf("RecordFailure called %d times, want 0: shutdown is not an outage", got)
	}
}

func TestSuccessResetsConsecutiveFailures(t *testing.T) {
	t.Parallel()
	state := newMemState()
	primary, _ := fakeProvider(t, "primary", providertest.FailFirst(2, nil, nil), chain.Policy{
		MaxRetries: 2,
		Cooldown:   chain.CooldownPolicy{FailureThreshold: 3, Cooldown: time.Minute},
	})

	res, err := newChain(state, primary).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "primary", 0)
	wantTrail(t, res, "primary failed server 500", "primary failed server 500", "primary ok  0")
	state.mu.Lock()
	defer state.mu.Unlock()
	if last := state.calls[len(state.calls)-1]; last.Op != "success" || last.Provider != "primary" {
		t.Errorf("last state call %+v, want RecordSuccess(primary)", last)
	}
	if state.consecutive["primary"] != 0 {
		t.Errorf("consecutive failures %d after success, want 0", state.consecutive["primary"])
	}
}

// TestCostAtTheAnsweringProvidersPrice: a priced provider's answer carries
// its cost; an unpriced one's carries none.
func TestCostAtTheAnsweringProvidersPrice(t *testing.T) {
	t.Parallel()
	usage := func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Content: "ok", Usage: &providertest.Usage{Prompt: 2000, Completion: 300}}
	}
	priced, _ := fakeProvider(t, "priced", usage, chain.Policy{})
	priced.Price = &chain.Price{InputPerMTok: 2.5, OutputPerMTok: 10}
	res, err := newChain(newMemState(), priced).Run(context.Background(), &hello)
	wantAnswer(t, res, err, "priced", 0)
	// 2000 × 2.5 / 1e6 + 300 × 10 / 1e6
	if res.Cost == nil || *res.Cost < 0.008-1e-12 || *res.Cost > 0.008+1e-12 {
		t.Errorf("cost %v, want 0.008", res.Cost)
	}
	free, _ := fakeProvider(t, "free", usage, chain.Policy{})
	res, err = newChain(newMemState(), free).Run(context.Background(), &hello)
	wantAnswer(t, res, err, "free", 0)
	if res.Cost != nil {
		t.Errorf("cost %v without a price, want none", *res.Cost)
	}
}

// TestAnAnswersModelOverItsBoundIsTheConfiguredOne: the model an answer
// names is outside text that goes into a header, a metric label and the
// response cache, which keeps at most 256 bytes of it; a longer one is
// replaced by the configured model, as an empty one is.
func TestAnAnswersModelOverItsBoundIsTheConfiguredOne(t *testing.T) {
	for reported, want := range map[string]string{
		"gpt-4o-2024-08-06":      "gpt-4o-2024-08-06",
		strings.Repeat("m", 256): strings.Repeat("m", 256),
		strings.Repeat("m", 257): "model-primary",
		"":                       "model-primary",
	} {
		step, _ := fakeProvider(t, "primary", func(int, providertest.Request) providertest.Reply {
			return providertest.Reply{Content: "fine", Model: reported}
		}, chain.Policy{})
		res, err := newChain(newMemState(), step).Run(context.Background(), &hello)
		if err != nil || res.Model != want {
			t.Errorf("reported %.20q… (%d bytes): model %.20q…, %v; want %.20q…", reported, len(reported), res.Model, err, want)
		}
	}
}

// probeState is a memState that grants every admission as the half-open
// probe, each with a lease of its own, and notes the leases given back.
type probeState struct {
	*memState
	granted  uint64
	released []uint64
}

func (s *probeState) Admit(context.Context, string, time.Time, time.Duration) chain.Admission {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.granted++
	return chain.Admission{Allowed: true, Probe: true, Lease: s.granted}
}

func (s *probeState) ReleaseProbe(_ context.Context, _ string, lease uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, lease)
	return nil
}

// TestAProbeIsOneCall: a half-open probe makes one call whatever the
// provider's max_retries, even when its failure opens no cooldown (the
// trip's write failed): its lease lasts one timeout, and a retry would
// outlive it while another worker probes too.
func TestAProbeIsOneCall(t *testing.T) {
	t.Parallel()
	state := &probeState{memState: newMemState()}
	primary, primarySrv := fakeProvider(t, "primary", providertest.Status(http.StatusInternalServerError),
		chain.Policy{MaxRetries: 4, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary, backup).Run(context.Background(), &hello)

	wantAnswer(t, res, err, "backup", 1)
	wantRequests(t, "primary", primarySrv, 1)
	wantTrail(t, res, "primary failed server 500", "backup ok  0")
	if !slices.Equal(state.released, []uint64{1, 2}) {
		t.Errorf("leases given back %v, want [1 2]: each provider's own", state.released)
	}
}
