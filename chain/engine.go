package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/internal/wait"
)

// ErrExhausted is returned (inside an *ExhaustedError) when no provider of the
// chain answered the request.
var ErrExhausted = errors.New("chain: no provider answered")

// ExhaustedError says why no provider answered, so the caller can decide
// between waiting (NAK with delay) and dead-lettering.
type ExhaustedError struct {
	// AllCooling: every provider was skipped for cooldown, none called.
	AllCooling bool
	// Poison: every provider but the rules one rejected the request itself
	// (class request); retrying cannot help.
	Poison bool
	// Undecided: every provider called rejected the request, but others were
	// skipped for a cooldown; it is poison only if they reject it too, so
	// the caller waits for ReopenAt and the rules provider does not answer.
	Undecided bool
	// Rejected names the providers that rejected the request, in chain order.
	Rejected []string
	// InvalidOutput: every provider called answered, none validly (class
	// invalid_output, or request for some): no outage is to blame, so the
	// caller retries only DETOUR_MAX_INVALID_DELIVERIES times.
	InvalidOutput bool
	// ReopenAt is the earliest end of a cooldown among the providers skipped
	// or tripped by this request; zero when none is cooling.
	ReopenAt time.Time
	// Last is the last failure seen, if any provider was called.
	Last error
}

// Error says why no provider answered.
func (e *ExhaustedError) Error() string {
	switch {
	case e.Poison:
		return fmt.Sprintf("%v: every provider rejected the request (%s): %v", ErrExhausted, strings.Join(e.Rejected, ", "), e.Last)
	case e.Undecided:
		return fmt.Sprintf("%v: rejected by %s; waiting for the providers cooling until %s to judge it: %v",
			ErrExhausted, strings.Join(e.Rejected, ", "), e.ReopenAt.UTC().Format(time.RFC3339), e.Last)
	case e.InvalidOutput:
		return fmt.Sprintf("%v: no provider gave a valid answer: %v", ErrExhausted, e.Last)
	case e.AllCooling:
		return fmt.Sprintf("%v: every provider is cooling until %s", ErrExhausted, e.ReopenAt.UTC().Format(time.RFC3339))
	case e.Last != nil:
		return fmt.Sprintf("%v: %v", ErrExhausted, e.Last)
	}
	return ErrExhausted.Error()
}

// Is makes errors.Is(err, ErrExhausted) hold.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Unwrap returns Last (a *CallError), so errors.As reaches its class,
// status and cause; nil when no provider was called.
func (e *ExhaustedError) Unwrap() error { return e.Last }

// Chain is an ordered list of providers sharing one State.
type Chain struct {
	Name  string
	Steps []Step
	State State
	// Logger receives auth failures and state write problems; nil discards.
	Logger *slog.Logger
	// Now and Rand let tests control time and jitter; nil means time.Now
	// and math/rand/v2.
	Now  func() time.Time
	Rand func() float64
}

// Run walks the chain for one request. It returns the winning Result, or a
// Result holding the attempts with an *ExhaustedError, or ctx's error
// wrapped when ctx ended first. It neither modifies req nor keeps any of it.
func (c *Chain) Run(ctx context.Context, req *Request) (Result, error) {
	// Run and what it calls while a provider is waited on keep their frames
	// small, the rare paths in functions of their own: a worker's stack past
	// 8 KiB doubles to 16 KiB for every call in flight (BENCHMARKS.md).
	res := Result{ID: req.ID, Status: StatusFailed}
	w := walk{start: c.now()}
	for pos := range c.Steps {
		if _, template := c.Steps[pos].Provider.(*Rules); template {
			if w.judged() {
				break // a poison request, or one that may be, gets no template answer
			}
			if c.staleResult(req, &res, pos, c.now()) {
				res.LatencyMs = c.now().Sub(w.start).Milliseconds()
				return res, nil
			}
		}
		if done, err := c.try(ctx, req, pos, &res, &w); done {
			return res, err
		}
	}
	return res, c.exhausted(req, &res, &w)
}

// walk is what a run has learned beside its result.
type walk struct {
	start, reopen                      time.Time
	called, skipped, rejected, invalid int
	rejecters                          []string
	last                               error
}

// judged says every provider called rejected the request itself: it is
// poison, or will be if those skipped for a cooldown reject it too.
func (w *walk) judged() bool { return w.called > 0 && w.called == w.rejected }

// poisoned says every provider but the rules one (no judge: it answers
// anything) was called and rejected the request.
func (w *walk) poisoned() bool { return w.judged() && w.skipped == 0 }

// try gives the request to the provider at pos, unless it is cooling, and
// reports whether the run is done: answered, or cut short by ctx (err).
func (c *Chain) try(ctx context.Context, req *Request, pos int, res *Result, w *walk) (done bool, err error) {
	step := &c.Steps[pos]
	name := step.Provider.Name()
	adm := c.State.Admit(ctx, name, c.now(), step.Policy.Timeout+time.Second)
	if !adm.Allowed {
		c.skipped(step, adm.Until, res, w)
		return false, nil
	}
	w.called++
	var resp Response
	retries := step.Policy.MaxRetries
	if adm.Probe {
		// A probe is one call: its lease lasts one timeout, and a
		// half-open failure trips.
		retries = 0
	}
	failure := c.pass(ctx, step, req, res, &resp, retries)
	if adm.Probe {
		// The outcome is recorded: let the next expiry be probed.
		c.releaseProbe(ctx, name, adm.Lease)
	}
	switch {
	case failure == nil:
		c.won(step, pos, &resp, res, w)
		return true, nil
	case failure.Class == ClassCanceled:
		res.LatencyMs = c.now().Sub(w.start).Milliseconds()
		return true, c.canceled(ctx)
	}
	switch failure.Class {
	case ClassRequest:
		w.rejected++
		w.rejecters = append(w.rejecters, name)
	case ClassInvalidOutput:
		w.invalid++
	}
	w.last = failure
	if until, cooling := c.State.Cooling(name, c.now()); cooling {
		w.reopen = earliest(w.reopen, until)
	}
	return false, nil
}

// skipped records a provider passed over for its cooldown.
func (c *Chain) skipped(step *Step, until time.Time, res *Result, w *walk) {
	p := step.Provider
	res.Attempts = append(res.Attempts, Attempt{
		Provider: p.Name(), Model: p.Model(), Outcome: OutcomeSkipped, Class: ClassCooldown,
		Error: "cooling until " + until.UTC().Format(time.RFC3339),
	})
	w.skipped++
	w.reopen = earliest(w.reopen, until)
}

// won fills res with the answer of the provider at pos.
func (c *Chain) won(step *Step, pos int, resp *Response, res *Result, w *walk) {
	p := step.Provider
	res.Status = StatusOK
	res.Content = resp.Content
	res.Model = resp.Model
	if res.Model == "" || len(res.Model) > MaxModelBytes {
		res.Model = p.Model()
	}
	res.Provider = p.Name()
	res.Position = pos
	res.Degraded = pos > 0
	res.Usage = resp.Usage
	if step.Price != nil {
		if cost := step.Price.Cost(resp.Usage); cost >= 0 && !math.IsInf(cost, 0) {
			res.Cost = &cost // a Price set in Go may be anything
		}
	}
	res.LatencyMs = c.now().Sub(w.start).Milliseconds()
}

func (c *Chain) canceled(ctx context.Context) error {
	return fmt.Errorf("chain %s: %w", c.Name, context.Cause(ctx))
}

func (c *Chain) releaseProbe(ctx context.Context, name string, lease uint64) {
	if err := c.State.ReleaseProbe(context.WithoutCancel(ctx), name, lease); err != nil {
		c.logger().Warn("releasing probe lease", "provider", name, "err", err)
	}
}

// exhausted ends a run that no provider answered: with a stale answer
// standing in, else with the *ExhaustedError that says why.
func (c *Chain) exhausted(req *Request, res *Result, w *walk) error {
	res.LatencyMs = c.now().Sub(w.start).Milliseconds()
	if !w.judged() { // a chain without a rules provider
		if c.staleResult(req, res, len(c.Steps), c.now()) {
			return nil
		}
	}
	ex := &ExhaustedError{
		AllCooling:    w.called == 0,
		Poison:        w.poisoned(),
		Undecided:     w.judged() && !w.poisoned(),
		Rejected:      w.rejecters,
		InvalidOutput: w.invalid > 0 && w.called == w.rejected+w.invalid,
		ReopenAt:      w.reopen,
		Last:          w.last,
	}
	res.Error = ex.Error()
	return ex
}

// pass makes up to 1+retries attempts on one provider: nil with its answer
// in resp, or the failure that ended the pass.
func (c *Chain) pass(ctx context.Context, step *Step, req *Request, res *Result, resp *Response, retries int) *CallError {
	for retry := 0; ; retry++ {
		started := c.now()
		if err := callOnce(ctx, step, req, resp); err != nil {
			failure := asCallError(err, ctx)
			c.failedAttempt(step, started, failure, res)
			if failure.Class == ClassCanceled {
				return failure
			}
			if stop := c.again(ctx, step, failure, started, retry, retries); stop != nil {
				return stop
			}
			continue
		}
		return c.answered(ctx, step, req, started, resp, res)
	}
}

// answered records an attempt that got an answer, and returns the failure
// that makes it no answer at all (validate).
func (c *Chain) answered(ctx context.Context, step *Step, req *Request, started time.Time, resp *Response, res *Result) *CallError {
	p := step.Provider
	attempt := Attempt{Provider: p.Name(), Model: p.Model(), Outcome: OutcomeOK, LatencyMs: c.now().Sub(started).Milliseconds()}
	if !resp.Complete {
		attempt.StopReason = text.Cut(resp.StopReason, maxStopReason)
	}
	if problem := validate(resp, req.Schema); problem != nil {
		attempt.Outcome, attempt.Class, attempt.Error = OutcomeFailed, ClassInvalidOutput, problem.Error()
		res.Attempts = append(res.Attempts, attempt)
		return &CallError{Class: ClassInvalidOutput, Err: problem}
	}
	res.Attempts = append(res.Attempts, attempt)
	if err := c.State.RecordSuccess(ctx, p.Name()); err != nil {
		c.logger().Warn("recording provider success", "provider", p.Name(), "err", err)
	}
	return nil
}

func (c *Chain) failedAttempt(step *Step, started time.Time, failure *CallError, res *Result) {
	p := step.Provider
	res.Attempts = append(res.Attempts, Attempt{
		Provider: p.Name(), Model: p.Model(), Outcome: OutcomeFailed, LatencyMs: c.now().Sub(started).Milliseconds(),
		Class: failure.Class, StatusCode: failure.StatusCode, RetryAfterMs: failure.RetryAfter.Milliseconds(),
		Error: failure.Error(), StopReason: failure.StopReason,
	})
}

// again records a failed attempt with the state and, when the pass may
// make another of its retries, waits out the backoff or the provider's wait
// hint. It returns nil to try again, else the failure that ends the pass:
// failure itself, or a cancellation that cut the wait short.
func (c *Chain) again(ctx context.Context, step *Step, failure *CallError, started time.Time, retry, retries int) *CallError {
	name, pol := step.Provider.Name(), step.Policy
	coolNow := c.record(ctx, step, failure, started)
	// A hint over max_retry_wait is not worth sleeping for (record opened a cooldown).
	if coolNow || !failure.Class.Retryable() || retry >= retries || failure.RetryAfter > pol.MaxRetryWait {
		return failure
	}
	delay := max(Backoff(retry, pol.BackoffBase, pol.BackoffMax, c.rand), failure.RetryAfter)
	if _, cooling := c.State.Cooling(name, c.now()); cooling {
		return failure // this request's own failures (or another worker's) tripped it
	}
	if err := wait.Sleep(ctx, delay); err != nil {
		return &CallError{Class: ClassCanceled, Err: err}
	}
	if _, cooling := c.State.Cooling(name, c.now()); cooling {
		return failure
	}
	return nil
}

// record feeds a counted failure to the state and reports whether it asked
// for a cooldown at once (auth, or a wait hint over max_retry_wait), which
// ends the pass.
func (c *Chain) record(ctx context.Context, step *Step, failure *CallError, started time.Time) (coolNow bool) {
	if !failure.Class.Counts() {
		return false
	}
	name, pol := step.Provider.Name(), step.Policy
	f := Failure{Class: failure.Class, Error: failure.Error(), At: c.now(), Started: started, Policy: pol.Cooldown}
	switch {
	case failure.Class == ClassAuth:
		f.CooldownFor = pol.Cooldown.AuthCooldown
		c.logger().Error("provider refused our credentials or account", "provider", name, "err", failure)
	case failure.Class.Retryable() && failure.RetryAfter > pol.MaxRetryWait:
		f.CooldownFor = hintCooldown(failure.RetryAfter, pol.Cooldown.MaxCooldown)
	}
	if err := c.State.RecordFailure(ctx, name, f); err != nil {
		c.logger().Warn("recording provider failure", "provider", name, "err", err)
	}
	return f.CooldownFor > 0
}

// hintCooldown is the cooldown a wait hint asks for: in whole seconds
// rounded up (as KV TTLs are), capped at maxCooldown when set, so that one
// "Retry-After: 86400" cannot take a provider out for a day.
func hintCooldown(hint, maxCooldown time.Duration) time.Duration {
	d := hint.Round(time.Second)
	if d < hint {
		d += time.Second
	}
	if maxCooldown > 0 && d > maxCooldown {
		d = maxCooldown
	}
	return d
}

// callOnce makes one attempt under the provider's timeout.
func callOnce(ctx context.Context, step *Step, req *Request, resp *Response) error {
	cancel := context.CancelFunc(func() {})
	if step.Policy.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, step.Policy.Timeout)
	}
	r, err := step.Provider.Call(ctx, req)
	cancel()
	*resp = r
	return err
}

// validate rejects a 2xx answer that must not win: not complete (filtered,
// refused, cut short, ended otherwise), empty, or not matching the schema.
func validate(resp *Response, schema *Schema) error {
	switch {
	case !resp.Complete:
		return stopProblem(resp)
	case isBlank(resp.Content):
		return errors.New("answer is empty")
	case schema != nil:
		return schema.Validate(resp.Content)
	}
	return nil
}

func (c *Chain) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Chain) rand() float64 {
	if c.Rand != nil {
		return c.Rand()
	}
	return rand.Float64()
}

func (c *Chain) logger() *slog.Logger { return logs.OrDiscard(c.Logger) }

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
