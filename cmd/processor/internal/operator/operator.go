package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/serverclock"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/suggest"
	"github.com/detourhq/detour/kvstate"
)

// ErrUsage marks a request refused before anything is written (a provider
// the chain file does not define, a bad -for or -reason): exit 2.
var ErrUsage = errors.New("operator: bad usage")

// usageError is a refused request, ErrUsage, its message saying why.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func refuse(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// ErrNoBucket is a trip that finds no bucket: no processor has started on
// this NATS.
var ErrNoBucket = fmt.Errorf("bucket %s does not exist yet: no processor has started on this NATS", kvstate.Bucket)

// maxReason is the longest -reason, in bytes, as a cooldown holds it.
const maxReason = 300

// Identity names the operator in what they write: user@host, from the
// operating system's account (else $USER) and the host name, "unknown"
// for what cannot be read.
func Identity() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = cmp.Or(u.Username, name)
	}
	host, _ := os.Hostname() // "" when it cannot be read
	return cmp.Or(name, "unknown") + "@" + cmp.Or(host, "unknown")
}

// Fleet is the provider state an operator acts on: the bucket, through JS
// (the checks need none), and the chain file that says which providers
// there are and how long their cooldowns may be.
type Fleet struct {
	JS   jetstream.JetStream
	File *config.File
	Path string // names the chain file in messages
	By   string // the operator, user@host (Identity)
	// Clock is the operator's own clock, nil meaning time.Now. Acts are
	// timed by the NATS server's time (package serverclock), by which
	// processors judge: a reset timed before the failures it clears would
	// clear nothing.
	Clock func() time.Time
	// Running are the running processors' records (fleet.Running): a trip
	// also opens a cooldown of each circuit a running definition keeps,
	// with state or not yet. Nil: only the circuits with state are known.
	Running []fleet.Instance
}

// provider returns the chain file's provider that name, a provider name
// or one of its circuits, belongs to, or an ErrUsage error that names the
// closest one, or lists them.
func (f Fleet) provider(name string) (config.Provider, error) {
	base, _, ok := kvstate.SplitCircuit(name)
	if !ok {
		return config.Provider{}, refuse("%q is neither a provider name nor a provider's circuit (provider=<8 hex digits of its definition's fingerprint>, as processor status shows it)", name)
	}
	if p, ok := lo.Find(f.File.Providers, func(p config.Provider) bool { return p.Name == base }); ok {
		return p, nil
	}
	name = base
	names := lo.Map(f.File.Providers, func(p config.Provider, _ int) string { return p.Name })
	hint := "its providers: " + strings.Join(names, ", ")
	if s, ok := suggest.Closest(name, names); ok {
		hint = fmt.Sprintf("did you mean %q?", s)
	}
	return config.Provider{}, refuse("no provider named %q in %s (%s)", name, f.Path, hint)
}

// CheckReset checks the providers a reset names, before anything is
// connected: at least one, each of the chain file or a circuit of one.
func (f Fleet) CheckReset(names []string) error {
	if len(names) == 0 {
		return refuse("name the providers to reset")
	}
	for _, name := range names {
		if _, err := f.provider(name); err != nil {
			return err
		}
	}
	return nil
}

// CheckTrip checks a trip of provider name for d, for reason: a provider
// of the chain file; d whole seconds, at least one (KV TTLs are), and no
// longer than the provider's longest cooldown; a reason of at most 300
// bytes.
func (f Fleet) CheckTrip(name string, d time.Duration, reason string) error {
	p, err := f.provider(name)
	if err != nil {
		return err
	}
	switch limit := p.LongestCooldown(); {
	case d < time.Second || d%time.Second != 0:
		return refuse("-for %s: a cooldown is whole seconds, at least 1s (KV TTLs are)", d)
	case d > limit:
		return refuse("-for %s is longer than %s's longest cooldown in %s, %s (the larger of its max_cooldown and auth_cooldown): "+
			"no trip of it runs longer. Trip for at most %s (and again before it ends), or raise max_cooldown in the chain file the processors run",
			d, name, f.Path, limit, limit)
	case strings.TrimSpace(reason) == "":
		return refuse("-reason is required: say why, for whoever sees the cooldown")
	case len(reason) > maxReason:
		return refuse("-reason is %d bytes, at most %d", len(reason), maxReason)
	}
	return nil
}

// ResetResult is what a reset did to one circuit.
type ResetResult struct {
	// Provider is the circuit: the provider's name, or provider=<short
	// fingerprint> for another definition's.
	Provider string
	kvstate.ResetOutcome
	NoBucket bool // the bucket does not exist yet: nothing to reset
}

// Reset ends the cooldown and clears the health of each provider named, in
// the order given, each once (kvstate.Store.Reset): a provider's name, its
// plain circuit and every other with state; a circuit's name, that circuit
// alone. Nothing is written when CheckReset refuses a name. It returns the
// results so far with the error that stopped it.
func (f Fleet) Reset(ctx context.Context, names []string) ([]ResetResult, error) {
	if err := f.CheckReset(names); err != nil {
		return nil, err
	}
	names = lo.Uniq(names)
	store, err := f.store(ctx)
	if errors.Is(err, ErrNoBucket) {
		return lo.Map(names, func(n string, _ int) ResetResult { return ResetResult{Provider: n, NoBucket: true} }), nil
	}
	if err != nil {
		return nil, err
	}
	var circuits []string
	for _, name := range names {
		circuits = append(circuits, name)
		if _, short, _ := kvstate.SplitCircuit(name); short == "" {
			circuits = append(circuits, store.Circuits(name)...)
		}
	}
	var out []ResetResult
	for _, c := range lo.Uniq(circuits) {
		r, err := store.Reset(ctx, c, f.By)
		out = append(out, ResetResult{Provider: c, ResetOutcome: r})
		if err != nil {
			return out, fmt.Errorf("resetting %s: %w", c, err)
		}
	}
	return out, nil
}

// TripResult is what a trip did to one circuit.
type TripResult struct {
	Provider string // the circuit, as ResetResult's
	For      time.Duration
	Reason   string
	HalfOpen bool // see kvstate.OperatorTrip.HalfOpen
	kvstate.TripOutcome
	// Others are the trips of the circuits of other definitions of the
	// provider, in name order (see Fleet.Trip).
	Others []TripResult
}

// Trip opens an operator's cooldown of provider name for d, for reason
// (kvstate.Store.Trip), once CheckTrip accepts it: a provider's name trips
// its plain circuit and, in Others, its other circuits (otherCircuits); a
// circuit's name, that circuit alone. It fails with ErrNoBucket before any
// processor created the bucket, and returns what it did so far with the
// error that stopped it.
func (f Fleet) Trip(ctx context.Context, name string, d time.Duration, reason string) (TripResult, error) {
	if err := f.CheckTrip(name, d, reason); err != nil {
		return TripResult{}, err
	}
	p, _ := f.provider(name)
	store, err := f.store(ctx)
	if err != nil {
		return TripResult{}, err
	}
	trip := func(circuit string) (TripResult, error) {
		res := TripResult{Provider: circuit, For: d, Reason: reason, HalfOpen: p.FailureThreshold > 0}
		res.TripOutcome, err = store.Trip(ctx, circuit, kvstate.OperatorTrip{For: d, Reason: reason, By: f.By, HalfOpen: res.HalfOpen})
		if err != nil {
			return res, fmt.Errorf("tripping %s: %w", circuit, err)
		}
		return res, nil
	}
	res, err := trip(name)
	if err != nil {
		return TripResult{}, err
	}
	for _, c := range f.otherCircuits(store, name) {
		other, err := trip(c)
		if err != nil {
			return res, err
		}
		res.Others = append(res.Others, other)
	}
	return res, nil
}

// otherCircuits returns, for a provider's name, its circuits besides the
// plain one: those with state, and those the running definitions of it
// keep; none for a circuit's name. While no definition holds the name and
// several run, all but one will keep a circuit of their own once the first
// failure claims it: each definition's own circuit is tripped too.
func (f Fleet) otherCircuits(store *kvstate.Store, name string) []string {
	if _, short, _ := kvstate.SplitCircuit(name); short != "" {
		return nil
	}
	circuits := store.Circuits(name)
	fingerprints := lo.Uniq(lo.FilterMap(f.Running, func(in fleet.Instance, _ int) (string, bool) {
		d, ok := in.Providers[name]
		return d.Fingerprint, ok
	}))
	_, held := store.Holder(name)
	for _, fp := range fingerprints {
		circuits = append(circuits, store.CircuitOf(name, fp))
		if !held && len(fingerprints) > 1 {
			circuits = append(circuits, kvstate.DefinitionCircuit(name, fp))
		}
	}
	slices.Sort(circuits)
	return slices.DeleteFunc(slices.Compact(circuits), func(c string) bool { return c == name })
}

// store is a store on the bucket, loaded once: a snapshot, not followed. A
// bucket that does not exist is ErrNoBucket.
func (f Fleet) store(ctx context.Context) (*kvstate.Store, error) {
	kv, err := f.JS.KeyValue(ctx, kvstate.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, ErrNoBucket
	}
	if err != nil {
		return nil, err
	}
	clock := serverclock.New(f.Clock, serverclock.BucketTime(kv), nil)
	_ = clock.Sync(ctx) // without a sample, the local time
	s := kvstate.New(f.JS, kv, kvstate.Options{Now: clock.Now})
	if err := s.Load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
