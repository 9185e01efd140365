package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/topology"
)

// maxClockSkew is how far in the future of this processor's clock an
// entry's created_at may be (another processor's clock) and still be valid.
const maxClockSkew = time.Minute

// writeTimeout bounds the write of an answer already paid for.
const writeTimeout = 5 * time.Second

// Next runs a request through the chain; *chain.Chain implements it. req
// belongs to the caller: Run must neither modify nor keep any of it.
type Next interface {
	Run(ctx context.Context, req *chain.Request) (chain.Result, error)
}

// Config assembles a Runner.
type Config struct {
	Chain    string // the chain's name, the first token of its keys; required
	Next     Next   // the chain itself; required
	Store    *Store // required
	Settings Settings
	// Providers are the chain's provider names in order, for the position
	// of a hit; Rules names those of type rules, whose answers are never
	// stored.
	Providers []string
	Rules     []string
	Now       func() time.Time // nil means time.Now
	Logger    *slog.Logger     // failed reads and writes; nil discards
	Observer  Observer         // nil tells nobody
}

// Observer is told how the cache took part in a request of chain (hit,
// miss or stale), for metrics, which cache never imports. It must not
// block.
type Observer interface {
	Cache(chain string, status chain.CacheStatus)
}

type nobody struct{}

func (nobody) Cache(string, chain.CacheStatus) {}

// Runner answers a chain's requests from the cache when it can, runs the
// chain otherwise and stores what may be kept. A request without a
// fingerprint goes straight to the chain.
type Runner struct {
	cfg   Config
	group singleflight.Group
}

// New returns a Runner, or an error naming the first required field unset.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Chain == "":
		return nil, errors.New("cache: Config.Chain is required")
	case cfg.Next == nil:
		return nil, errors.New("cache: Config.Next is required")
	case cfg.Store == nil:
		return nil, errors.New("cache: Config.Store is required")
	case cfg.Settings.TTL <= 0 || cfg.Settings.StaleTTL < 0:
		return nil, fmt.Errorf("cache: Config.Settings %+v: TTL must be positive and StaleTTL not negative", cfg.Settings)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Observer = cmp.Or[Observer](cfg.Observer, nobody{})
	cfg.Logger = logs.OrDiscard(cfg.Logger).With("chain", cfg.Chain)
	return &Runner{cfg: cfg}, nil
}

// outcome is what one run through the cache gave.
type outcome struct {
	res chain.Result
	err error
}

// Run answers req from a fresh entry ("hit"), else from the chain ("miss"),
// or from a stale entry when no provider answers ("stale"); identical
// requests in flight at once share one run (docs/cache.md). Errors are the
// chain's. req is neither modified nor kept.
func (r *Runner) Run(ctx context.Context, req *chain.Request) (chain.Result, error) {
	var fingerprint string
	if req.Cache.Fingerprint != nil {
		fingerprint = req.Cache.Fingerprint()
	}
	if fingerprint == "" {
		return r.cfg.Next.Run(ctx, req)
	}
	key := Key(r.cfg.Chain, req.Cache.Scope, fingerprint)
	for {
		led := false // set by Do's function, which runs on this goroutine
		v, _, _ := r.group.Do(flightKey(key, req.Cache), func() (any, error) {
			led = true
			res, err := r.lookup(ctx, key, *req)
			return outcome{res, err}, nil
		})
		o := v.(outcome)
		if led {
			return o.res, o.err
		}
		var ex *chain.ExhaustedError
		if o.err == nil || errors.As(o.err, &ex) || ctx.Err() != nil {
			return r.follow(req, o), o.err
		}
		// The leader's own context ended its run, not this one's: again.
	}
}

// flightKey is what identical requests share a run by: the key and the
// controls that change what the run does.
func flightKey(key string, c chain.CacheControl) string {
	stale := "-"
	if c.StaleIfError != nil {
		stale = c.StaleIfError.String()
	}
	return fmt.Sprintf("%s|%t|%t|%s", key, c.NoCache, c.NoStore, stale)
}

// follow is the result of req, which shared another's run: a provider's
// fresh answer is its hit, shaped as a stored one (no attempts, no cost).
func (r *Runner) follow(req *chain.Request, o outcome) chain.Result {
	res := o.res
	res.ID = req.ID
	if o.err == nil && res.Cache == chain.CacheMiss && !slices.Contains(r.cfg.Rules, res.Provider) {
		res.Cache, res.AgeS, res.Attempts, res.LatencyMs, res.Cost = chain.CacheHit, 0, []chain.Attempt{}, 0, nil
	}
	if o.err == nil {
		r.cfg.Observer.Cache(r.cfg.Chain, res.Cache)
	}
	return res
}

// lookup reads the entry once, answers from it when fresh, else runs the
// chain with the entry as its stale answer and stores the answer.
func (r *Runner) lookup(ctx context.Context, key string, req chain.Request) (chain.Result, error) {
	now := r.cfg.Now()
	e, rev, found, err := r.cfg.Store.Get(ctx, key)
	if found && e.CreatedAt.After(now.Add(maxClockSkew)) {
		found, err = false, fmt.Errorf("%w: created_at %s is in the future", ErrInvalidEntry, e.CreatedAt.Format(time.RFC3339))
	}
	readable := err == nil || errors.Is(err, ErrInvalidEntry)
	switch {
	case errors.Is(err, ErrInvalidEntry):
		// Not served; the answer of this miss replaces it.
		r.cfg.Logger.Warn("an invalid entry in the response cache; treating it as absent", "err", err)
	case topology.Gone(err):
		readable = r.ensure(ctx, err) // now, so that this answer is kept at revision 0
	case err != nil:
		r.cfg.Logger.Warn("reading the response cache; answering without it", "err", err)
	}
	if found && !req.Cache.NoCache && e.Fresh(now) {
		r.cfg.Observer.Cache(r.cfg.Chain, chain.CacheHit)
		return r.hit(req, e, now), nil
	}
	if found {
		req.Stale = r.staleAnswer(e, req.Cache)
	}
	res, err := r.cfg.Next.Run(ctx, &req)
	if err == nil && res.Cache == chain.CacheStale {
		r.cfg.Observer.Cache(r.cfg.Chain, chain.CacheStale)
		return res, nil
	}
	res.Cache = chain.CacheMiss
	r.cfg.Observer.Cache(r.cfg.Chain, chain.CacheMiss)
	if err == nil && readable && r.storable(res, req) {
		r.store(ctx, key, rev, res)
	}
	return res, err
}

// hit is the result of a fresh entry.
func (r *Runner) hit(req chain.Request, e Entry, now time.Time) chain.Result {
	pos := max(slices.Index(r.cfg.Providers, e.Provider), 0)
	return chain.Result{ID: req.ID, Status: chain.StatusOK, Content: e.Content, Model: e.Model, Provider: e.Provider,
		Position: pos, Degraded: pos > 0, Usage: e.Usage, Cache: chain.CacheHit, AgeS: chain.AgeSeconds(e.CreatedAt, now),
		Attempts: []chain.Attempt{}, LatencyMs: r.cfg.Now().Sub(now).Milliseconds()}
}

// staleAnswer is the entry as a stale answer for the chain, or nil when
// the chain or the request allows none.
func (r *Runner) staleAnswer(e Entry, c chain.CacheControl) *chain.StaleAnswer {
	if r.cfg.Settings.StaleTTL == 0 || c.StaleIfError != nil && *c.StaleIfError <= 0 {
		return nil
	}
	until := e.StaleUntil
	if c.StaleIfError != nil && e.FreshUntil.Add(*c.StaleIfError).Before(until) {
		until = e.FreshUntil.Add(*c.StaleIfError)
	}
	return &chain.StaleAnswer{Content: e.Content, Provider: e.Provider, Model: e.Model, Usage: e.Usage,
		CreatedAt: e.CreatedAt, Until: until}
}

// storable reports whether an answer may be kept (docs/cache.md, "What is
// stored").
func (r *Runner) storable(res chain.Result, req chain.Request) bool {
	return res.Status == chain.StatusOK && res.Cache != chain.CacheStale && !req.Cache.NoStore &&
		!slices.Contains(r.cfg.Rules, res.Provider) && res.Model != chain.RulesModel &&
		strings.TrimSpace(res.Content) != ""
}

// store writes the answer over revision rev. A lost race leaves the
// winner's; a missing bucket is created again for the next answer.
func (r *Runner) store(ctx context.Context, key string, rev uint64, res chain.Result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := r.cfg.Store.Put(ctx, key, newEntry(res, r.cfg.Settings, r.cfg.Now()), rev)
	switch {
	case err == nil, errors.Is(err, ErrConflict):
	case topology.Gone(err):
		r.ensure(ctx, err)
	default:
		r.cfg.Logger.Warn("storing an answer in the response cache", "err", err)
	}
}

// ensure creates the bucket again, found gone by err, within writeTimeout,
// and reports whether it exists now; a failure is logged.
func (r *Runner) ensure(ctx context.Context, err error) bool {
	r.cfg.Logger.Warn("the response cache bucket is gone; creating it again", "err", err)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := r.cfg.Store.Ensure(ctx); err != nil {
		r.cfg.Logger.Error("creating the response cache bucket", "err", err)
		return false
	}
	return true
}
