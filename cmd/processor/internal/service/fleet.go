package service

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/samber/lo"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/internal/wait"
)

// fleetEvery spaces the checks after the first, which runs at start.
const fleetEvery = 30 * time.Second

// Bounds of one conflict's log line, which would otherwise name every
// processor of a large fleet: definitions from elsewhere, processors for
// one, and bytes of one definition with its processors.
const (
	logDefinitions     = 4
	logProcessors      = 4
	logDefinitionBytes = 400
)

// watchFleet records what this processor runs in the provider bucket, with
// a TTL of three checks so that the record of one stopped without a word
// expires, and compares it with the others' records in the mirror, at start
// and every fleetEvery until ctx ends; then it withdraws the record. Each
// check keeps the circuits (circuitKeeper), counts the conflicts and logs
// them (fleetLog).
func (p *Processor) watchFleet(ctx context.Context) {
	self := fleet.Instance{Processor: p.id, Providers: fleet.Definitions(p.opts.File), Chains: maps.Clone(p.opts.File.Chains)}
	record := fleet.Record(p.id, p.opts.File)
	l := newFleetLog(self, p.opts.Logger)
	every := cmp.Or(p.opts.fleetEvery, fleetEvery)
	ttl := max(time.Second, (3 * every).Round(time.Second))
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := p.store.Withdraw(ctx, p.id); err != nil {
			p.opts.Logger.Warn("withdrawing the record of what this processor runs; it expires within its TTL", "ttl", ttl, "err", err)
		}
	}()
	for first := true; ; first = false {
		if err := p.store.Record(ctx, p.id, record, ttl); err != nil && ctx.Err() == nil {
			p.opts.Logger.Warn("recording what this processor runs", "err", err)
		}
		others := slices.DeleteFunc(fleet.Instances(p.store.Running()), func(in fleet.Instance) bool { return in.Processor == p.id })
		if ctx.Err() == nil {
			p.keeper.round(ctx, others, p.store.Following())
		}
		everyone := append(others, self)
		conflicts := fleet.Involving(fleet.Conflicts(everyone), p.id)
		chainConflicts := fleet.ChainsInvolving(fleet.ChainConflicts(everyone), p.id)
		p.fleetMu.Lock()
		p.conflicts, p.chainConflicts = conflicts, chainConflicts
		p.fleetMu.Unlock()
		p.opts.Metrics.ConfigConflicts(len(conflicts), len(chainConflicts))
		l.round(conflicts, first)
		l.chains(chainConflicts, first)
		if wait.Sleep(ctx, every) != nil {
			return
		}
	}
}

// fleetLog logs the conflicts each check finds: at error at start, when
// this processor is the newcomer whose chain file differs, later at warn,
// once for as long as each stays the same. It remembers one digest per
// name in conflict now, so records that change every round cost no memory
// that grows.
type fleetLog struct {
	self   fleet.Instance
	logger *slog.Logger
	// reported and reportedChains map a provider or chain name in conflict
	// to the digest of the conflict last logged for it.
	reported       map[string]string
	reportedChains map[string]string
}

func newFleetLog(self fleet.Instance, logger *slog.Logger) *fleetLog {
	return &fleetLog{self: self, logger: logger, reported: map[string]string{}, reportedChains: map[string]string{}}
}

// round logs the provider conflicts of one check.
func (l *fleetLog) round(conflicts []fleet.Conflict, first bool) {
	forget(l.reported, conflicts, func(c fleet.Conflict) string { return c.Provider })
	for _, c := range conflicts {
		mine := l.self.Providers[c.Provider]
		theirs := lo.FilterMap(c.Definitions, func(h fleet.Held, _ int) (string, bool) {
			line := text.Cut(h.Definition.String()+" on "+namedProcessors(h.Processors), logDefinitionBytes)
			return line, h.Fingerprint != mine.Fingerprint
		})
		l.report(l.reported, first, "another processor defines a provider of this name differently; fix the chain files so that they agree",
			"provider", c.Provider, digest(c), mine.String(), theirs)
	}
}

// chains logs the chain conflicts of one check, as round does.
func (l *fleetLog) chains(conflicts []fleet.ChainConflict, first bool) {
	forget(l.reportedChains, conflicts, func(c fleet.ChainConflict) string { return c.Chain })
	for _, c := range conflicts {
		mine := strings.Join(l.self.Chains[c.Chain], " ")
		theirs := lo.FilterMap(c.Lists, func(list fleet.HeldList, _ int) (string, bool) {
			joined := strings.Join(list.Providers, " ")
			return text.Cut("["+joined+"] on "+namedProcessors(list.Processors), logDefinitionBytes), joined != mine
		})
		l.report(l.reportedChains, first, "another processor runs a chain of this name with different providers; its requests go to either: fix the chain files so that they agree",
			"chain", c.Chain, digest(c), "["+mine+"]", theirs)
	}
}

// report logs the conflict over name, naming this processor's side (here)
// and at most logDefinitions of the others, unless it was logged as it
// stands (digest).
func (l *fleetLog) report(reported map[string]string, first bool, msg, kind, name, digest, here string, others []string) {
	if reported[name] == digest {
		return
	}
	reported[name] = digest
	shown := others[:min(len(others), logDefinitions)]
	args := []any{kind, name, "here", here, "processor", l.self.Processor, "elsewhere", shown}
	if len(others) > len(shown) {
		args = append(args, "elsewhere_not_shown", len(others)-len(shown))
	}
	log := l.logger.Warn
	if first {
		log = l.logger.Error
	}
	log(msg, args...)
}

// forget drops the names no longer in conflict: one that comes back is
// logged again.
func forget[C any](reported map[string]string, conflicts []C, name func(C) string) {
	maps.DeleteFunc(reported, func(n, _ string) bool {
		return !slices.ContainsFunc(conflicts, func(c C) bool { return name(c) == n })
	})
}

// namedProcessors names at most logProcessors of processors, and how many
// more there are.
func namedProcessors(processors []string) string {
	if len(processors) <= logProcessors {
		return strings.Join(processors, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(processors[:logProcessors], ", "), len(processors)-logProcessors)
}

// digest stands for a conflict in fleetLog's memory: it changes when any of
// its parts (a definition, a list of providers or of processors) does.
func digest(conflict any) string {
	b, _ := json.Marshal(conflict) // strings, numbers and slices: it cannot fail
	sum := sha256.Sum256(b)
	return string(sum[:])
}
