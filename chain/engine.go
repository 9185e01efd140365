package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/wait"
)

// ErrExhausted is returned (inside an *ExhaustedError) when no provider of the
// chain answered the request.
var ErrExhausted = errors.New("chain: no provider answered")

// ExhaustedError says why no provider answered, so the caller can decide
// between waiting (NAK with delay) and dead-lettering.
type ExhaustedError struct {
	// AllCooling is set when every provider was skipped for cooldown and none
	// was called.
	AllCooling bool
	// Poison is set when every provider that was called rejected the request
	// itself (class request): retrying cannot help.
	Poison bool
	// InvalidOutput is set when every provider that was called answered, but
	// no answer was valid (class invalid_output, or request for some): no
	// outage is to blame, so the caller retries only a bounded number of
	// times (DETOUR_MAX_INVALID_DELIVERIES) before giving up.
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
		return fmt.Sprintf("%v: every provider rejected the request: %v", ErrExhausted, e.Last)
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

// Unwrap returns Last, the failure that ended the last provider's pass (a
// *CallError), so errors.As and errors.Is reach its class, status and cause;
// nil when no provider was called (AllCooling). errors.Is(err, ErrExhausted)
// still holds through Is.
func (e *ExhaustedError) Unwrap() error { return e.Last }

// Chain is an ordered list of providers sharing one State.
type Chain struct {
	Name  string
	Steps []Step
	State State
	// Logger receives auth failures (error level) and state write problems;
	// nil discards.
	Logger *slog.Logger
	// Now and Rand are injected so tests control time and jitter; nil means
	// time.Now and math/rand/v2.
	Now  func() time.Time
	Rand func() float64
}

// Run walks the chain for one request. It returns the winning Result, or a
// Result holding the attempts together with an *ExhaustedError, or the
// context's error wrapped when ctx ended (shutdown) before an answer.
func (c *Chain) Run(ctx context.Context, req Request) (Result, error) {
	start := c.now()
	res := Result{ID: req.ID, Status: StatusFailed}
	var (
		reopen                    time.Time
		called, rejected, invalid int
		last                      error
	)
	for pos, step := range c.Steps {
		p := step.Provider
		_, template := p.(*Rules)
		if template && called > 0 && called == rejected {
			break // a poison request gets no template answer
		}
		if template {
			if stale, ok := c.staleResult(req, res, pos, c.now()); ok {
				stale.LatencyMs = c.now().Sub(start).Milliseconds()
				return stale, nil
			}
		}
		adm := c.State.Admit(ctx, p.Name(), c.now(), step.Policy.Timeout+time.Second)
		if !adm.Allowed {
			res.Attempts = append(res.Attempts, Attempt{
				Provider: p.Name(), Model: p.Model(), Outcome: OutcomeSkipped, Class: ClassCooldown,
				Error: "cooling until " + adm.Until.UTC().Format(time.RFC3339),
			})
			reopen = earliest(reopen, adm.Until)
			continue
		}
		called++
		resp, failure := c.pass(ctx, step, req, &res)
		if adm.Probe {
			// The outcome is recorded (success closed the circuit, failure
			// opened the next cooldown): let the next expiry be probed.
			if err := c.State.ReleaseProbe(context.WithoutCancel(ctx), p.Name()); err != nil {
				c.logger().Warn("releasing probe lease", "provider", p.Name(), "err", err)
			}
		}
		if failure == nil {
			res.Status = StatusOK
			res.Content = resp.Content
			res.Model = resp.Model
			if res.Model == "" {
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
			res.LatencyMs = c.now().Sub(start).Milliseconds()
			return res, nil
		}
		if failure.Class == ClassCanceled {
			res.LatencyMs = c.now().Sub(start).Milliseconds()
			return res, fmt.Errorf("chain %s: %w", c.Name, context.Cause(ctx))
		}
		switch failure.Class {
		case ClassRequest:
			rejected++
		case ClassInvalidOutput:
			invalid++
		}
		last = failure
		if until, cooling := c.State.Cooling(p.Name(), c.now()); cooling {
			reopen = earliest(reopen, until)
		}
	}
	res.LatencyMs = c.now().Sub(start).Milliseconds()
	if called == 0 || called != rejected { // a chain without a rules provider
		if stale, ok := c.staleResult(req, res, len(c.Steps), c.now()); ok {
			return stale, nil
		}
	}
	ex := &ExhaustedError{
		AllCooling:    called == 0,
		Poison:        called > 0 && called == rejected,
		InvalidOutput: invalid > 0 && called == rejected+invalid,
		ReopenAt:      reopen,
		Last:          last,
	}
	res.Error = ex.Error()
	return res, ex
}

// pass makes up to 1+MaxRetries attempts on one provider and returns its answer,
// or the failure that ended the pass.
func (c *Chain) pass(ctx context.Context, step Step, req Request, res *Result) (Response, *CallError) {
	p, pol := step.Provider, step.Policy
	for retry := 0; ; retry++ {
		started := c.now()
		resp, err := callOnce(ctx, step, req)
		attempt := Attempt{Provider: p.Name(), Model: p.Model(), Outcome: OutcomeOK, LatencyMs: c.now().Sub(started).Milliseconds()}
		if err == nil {
			attempt.StopReason = unusualStop(resp.StopReason)
			if problem := validate(resp, req.Schema); problem != nil {
				attempt.Outcome, attempt.Class, attempt.Error = OutcomeFailed, ClassInvalidOutput, problem.Error()
				res.Attempts = append(res.Attempts, attempt)
				return resp, &CallError{Class: ClassInvalidOutput, Err: problem}
			}
			res.Attempts = append(res.Attempts, attempt)
			if err := c.State.RecordSuccess(ctx, p.Name()); err != nil {
				c.logger().Warn("recording provider success", "provider", p.Name(), "err", err)
			}
			return resp, nil
		}
		failure := asCallError(err, ctx)
		attempt.Outcome, attempt.Class, attempt.StatusCode = OutcomeFailed, failure.Class, failure.StatusCode
		attempt.RetryAfterMs, attempt.Error = failure.RetryAfter.Milliseconds(), failure.Error()
		res.Attempts = append(res.Attempts, attempt)
		if failure.Class == ClassCanceled {
			return resp, failure
		}
		coolNow := c.record(ctx, step, failure)
		if coolNow || !failure.Class.Retryable() || retry >= pol.MaxRetries {
			return resp, failure
		}
		if failure.RetryAfter > pol.MaxRetryWait {
			// Not worth sleeping for: move on. With cooldowns on, record has
			// already ended the pass above by opening one of the hint's length.
			return resp, failure
		}
		delay := Backoff(retry, pol.BackoffBase, pol.BackoffMax, c.rand)
		delay = max(delay, failure.RetryAfter)
		if _, cooling := c.State.Cooling(p.Name(), c.now()); cooling {
			return resp, failure // this request's own failures (or another worker's) tripped it
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return resp, &CallError{Class: ClassCanceled, Err: err}
		}
		if _, cooling := c.State.Cooling(p.Name(), c.now()); cooling {
			return resp, failure
		}
	}
}

// record feeds a counted failure to the state and reports whether it asked
// for a cooldown at once (auth, a wait hint longer than max_retry_wait on any
// retryable class), which ends the pass.
func (c *Chain) record(ctx context.Context, step Step, failure *CallError) (coolNow bool) {
	if !failure.Class.Counts() {
		return false
	}
	name, pol := step.Provider.Name(), step.Policy
	f := Failure{Class: failure.Class, Error: failure.Error(), At: c.now(), Policy: pol.Cooldown}
	switch {
	case failure.Class == ClassAuth:
		f.CooldownFor = pol.Cooldown.AuthCooldown
		c.logger().Error("provider refused our credentials, model or billing", "provider", name, "err", failure)
	case failure.Class.Retryable() && failure.RetryAfter > pol.MaxRetryWait:
		f.CooldownFor = hintCooldown(failure.RetryAfter, pol.Cooldown.MaxCooldown)
	}
	if err := c.State.RecordFailure(ctx, name, f); err != nil {
		c.logger().Warn("recording provider failure", "provider", name, "err", err)
	}
	return f.CooldownFor > 0
}

// hintCooldown is the cooldown a provider's wait hint asks for: the hint in
// whole seconds, rounded up (KV TTLs are whole seconds), and capped at
// maxCooldown when that is set, so that one "Retry-After: 86400" cannot take
// a provider out for a day.
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

func callOnce(ctx context.Context, step Step, req Request) (Response, error) {
	if step.Policy.Timeout <= 0 {
		return step.Provider.Call(ctx, req)
	}
	attemptCtx, cancel := context.WithTimeout(ctx, step.Policy.Timeout)
	defer cancel()
	return step.Provider.Call(attemptCtx, req)
}

// validate rejects a 2xx answer that must not win: withheld by a content
// filter or a refusal, cut short, empty, or not satisfying the request's
// schema.
func validate(resp Response, schema *Schema) error {
	if problem := stopProblem(resp); problem != nil {
		return problem
	}
	switch {
	case resp.Truncated:
		return errors.New("answer truncated: the provider stopped for length")
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

func (c *Chain) logger() *slog.Logger {
	return logs.OrDiscard(c.Logger)
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
