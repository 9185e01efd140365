package service

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/kvstate"
)

// circuitState is the chains' State: the provider-state store, each
// provider name mapped at every call to its definition's circuit
// (kvstate.Store.CircuitOf): the plain name while this definition holds it,
// or none does, else provider=<short fingerprint>. Results keep the name.
// The first failure of a name none holds claims it first, so healthy
// traffic writes nothing, the claim included.
type circuitState struct {
	store   *kvstate.Store
	holders map[string]kvstate.Holder // this processor's definitions
}

var _ chain.State = circuitState{}

func (c circuitState) circuit(provider string) string {
	return c.store.CircuitOf(provider, c.holders[provider].Fingerprint)
}

func (c circuitState) Admit(ctx context.Context, provider string, now time.Time, lease time.Duration) chain.Admission {
	return c.store.Admit(ctx, c.circuit(provider), now, lease)
}

func (c circuitState) ReleaseProbe(ctx context.Context, provider string, lease uint64) error {
	return c.store.ReleaseProbe(ctx, c.circuit(provider), lease)
}

func (c circuitState) Cooling(provider string, now time.Time) (time.Time, bool) {
	return c.store.Cooling(c.circuit(provider), now)
}

// RecordFailure claims provider's name when none holds it, and records the
// failure whatever the claim did: on the plain circuit if it failed.
func (c circuitState) RecordFailure(ctx context.Context, provider string, f chain.Failure) error {
	var claimed error
	if _, held := c.store.Holder(provider); !held {
		claimed = c.store.Claim(ctx, provider, c.holders[provider])
	}
	return errors.Join(claimed, c.store.RecordFailure(ctx, c.circuit(provider), f))
}

func (c circuitState) RecordSuccess(ctx context.Context, provider string) error {
	return c.store.RecordSuccess(ctx, c.circuit(provider))
}

// circuitKeeper keeps, at every fleet check, the circuits of this
// processor's definitions (docs/state.md#one-circuit-per-definition):
//   - a name held by a definition no running processor recorded at two
//     checks in a row is taken over (kvstate.Store.TakeOver), once the
//     plain circuit is not cooling and this definition's own is closed
//     with no failure, so that the move loses nothing;
//   - once this definition holds the name, its own provider=<short
//     fingerprint> circuit is cleared, and so is any other definition's
//     that no running processor recorded at two checks in a row.
//
// Two checks, as a processor just started may miss the first. A cooling
// circuit is never taken over nor cleared: its cooldown ends by its TTL
// anyway, and clearing it would send restarted processors to the failing
// endpoint again. Only a complete check decides: its mirror following the
// bucket, so that it holds every running processor's record.
type circuitKeeper struct {
	store  *kvstate.Store
	own    map[string]kvstate.Holder
	now    func() time.Time
	logger *slog.Logger
	// kept is the circuit each provider kept at the last check; unheard
	// the circuits and holders (heldKey) unrecorded at the last complete
	// check.
	kept    map[string]string
	unheard map[string]bool
}

// round keeps the circuits after one check that found others running;
// complete says whether it may judge that a definition runs nowhere.
func (k *circuitKeeper) round(ctx context.Context, others []fleet.Instance, complete bool) {
	unheard := k.unheard
	k.unheard = map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(k.own)) {
		if err := k.keep(ctx, name, others, complete, unheard); err != nil && ctx.Err() == nil {
			k.logger.Warn("keeping a provider's circuits failed; will try again", "provider", name, "err", err)
		}
		k.report(name)
	}
}

// keep takes provider's name over and clears circuits, as circuitKeeper
// says.
func (k *circuitKeeper) keep(ctx context.Context, provider string, others []fleet.Instance, complete bool, unheard map[string]bool) error {
	mine := k.own[provider].Fingerprint
	own := kvstate.DefinitionCircuit(provider, mine)
	h, held := k.store.Holder(provider)
	gone := held && h.Fingerprint != mine && complete && !announced(others, provider, func(fp string) bool { return fp == h.Fingerprint })
	switch {
	case gone && (!unheard[heldKey(provider, h)] || !k.unused(own) || k.cooling(provider)):
		k.unheard[heldKey(provider, h)] = true // taken over if unheard at the next check too
	case gone:
		took, err := k.store.TakeOver(ctx, provider, k.own[provider])
		if err != nil {
			return err
		}
		if took {
			k.logger.Info("this processor's definition of the provider takes its name's circuit over: no running processor runs the definition that held it, whose health, cooldown and probe were cleared",
				"provider", provider, "was", h.Fingerprint+" "+h.Definition)
		}
	}
	circuits := k.store.Circuits(provider)
	if k.store.CircuitOf(provider, mine) == provider && slices.Contains(circuits, own) && !k.cooling(own) {
		if err := k.store.Clear(ctx, own); err != nil {
			return err
		}
	}
	if !complete {
		return nil
	}
	for _, c := range circuits {
		_, short, ok := kvstate.SplitCircuit(c)
		if !ok || short == "" || c == own || announced(others, provider, func(fp string) bool { return kvstate.DefinitionCircuit(provider, fp) == c }) {
			continue
		}
		if !unheard[c] || k.cooling(c) {
			k.unheard[c] = true // cleared if unheard, and not cooling, at the next check too
			continue
		}
		if err := k.store.Clear(ctx, c); err != nil {
			return err
		}
		k.logger.Info("cleared the circuit of a definition of the provider that no running processor runs", "provider", provider, "circuit", c)
	}
	return nil
}

// heldKey stands for the holder h of provider's name in unheard.
func heldKey(provider string, h kvstate.Holder) string {
	return kvstate.DefinitionKey(provider) + " " + h.Fingerprint
}

// unused reports whether circuit is closed with no failure counted.
func (k *circuitKeeper) unused(circuit string) bool {
	h, _ := k.store.Health(circuit)
	return k.store.State(circuit, k.now()) == kvstate.StateClosed && h.ConsecutiveFailures == 0
}

func (k *circuitKeeper) cooling(circuit string) bool {
	_, cooling := k.store.Cooling(circuit, k.now())
	return cooling
}

// report logs a change of the circuit provider keeps: at warn when another
// definition holds the name, at info when this one comes to.
func (k *circuitKeeper) report(provider string) {
	circuit := k.store.CircuitOf(provider, k.own[provider].Fingerprint)
	before, seen := k.kept[provider]
	k.kept[provider] = circuit
	switch {
	case circuit == before:
	case circuit != provider:
		h, _ := k.store.Holder(provider)
		k.logger.Warn("another definition of this provider name holds its circuit; this processor's definition keeps a circuit of its own",
			"provider", provider, "circuit", circuit, "holder", h.Fingerprint+" "+h.Definition)
	case seen:
		k.logger.Info("this processor's definition of the provider now holds its name's circuit", "provider", provider, "was", before)
	}
}

// announced reports whether any of instances runs a definition of provider
// whose fingerprint is.
func announced(instances []fleet.Instance, provider string, is func(fingerprint string) bool) bool {
	return slices.ContainsFunc(instances, func(in fleet.Instance) bool {
		d, ok := in.Providers[provider]
		return ok && is(d.Fingerprint)
	})
}

// known is every provider of the chain file and the circuit its
// definition keeps now, reported besides the bucket's other names.
func (c circuitState) known() []string {
	var out []string
	for provider := range c.holders {
		out = append(out, provider)
		if circuit := c.circuit(provider); circuit != provider {
			out = append(out, circuit)
		}
	}
	return out
}
