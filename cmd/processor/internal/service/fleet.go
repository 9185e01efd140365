package service

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/internal/wait"
)

// fleetEvery spaces the checks after the first, which runs at start.
const fleetEvery = 30 * time.Second

// Bounds of one conflict's log line: a fleet of many processors would
// otherwise name them all on every line.
const (
	// logDefinitions is the most definitions from elsewhere one line names.
	logDefinitions = 4
	// logProcessors is the most processors named for one definition.
	logProcessors = 4
	// logDefinitionBytes bounds one definition with its processors.
	logDefinitionBytes = 400
)

// watchFleet records in the provider bucket what this processor runs
// (kvstate.Store.Record, renewed at every check, with a TTL of three
// checks, so that the record of a processor that stopped without a word
// expires), and compares it with every other running processor's record
// in the mirror, at start and every fleetEvery until ctx ends; then it
// withdraws its record. It keeps its definitions' circuits from what it
// finds (circuitKeeper). detour_config_conflicts counts the provider and
// the chain names in conflict; fleetLog says which conflicts are logged.
func (p *Processor) watchFleet(ctx context.Context) {
	self := fleet.Instance{Processor: p.id, Providers: fleet.Definitions(p.opts.File), Chains: fleet.Chains(p.opts.File)}
	record := fleet.Record(p.id, p.opts.File)
	l := newFleetLog(self, p.opts.Logger)
	every := p.opts.fleetEvery
	if every <= 0 {
		every = fleetEvery
	}
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
		p.opts.Metrics.ConfigConflicts(len(conflicts))
		p.opts.Metrics.ChainConflicts(len(chainConflicts))
		l.round(conflicts, first)
		l.chains(chainConflicts, first)
		if wait.Sleep(ctx, every) != nil {
			return
		}
	}
}

// fleetLog logs the conflicts each check finds. A conflict found at start
// is logged at error, naming both sides: this processor is the newcomer
// whose chain file differs. One found later (another processor started
// since) is logged at warn, once for as long as it stays the same. What it
// remembers is one digest per provider name of this processor in conflict
// now, so records that change every round cost no memory that grows.
type fleetLog struct {
	self   fleet.Instance
	logger *slog.Logger
	// reported maps a provider name in conflict to the digest of the
	// conflict last logged for it; reportedChains a chain name in
	// conflict.
	reported       map[string]string
	reportedChains map[string]string
}

func newFleetLog(self fleet.Instance, logger *slog.Logger) *fleetLog {
	return &fleetLog{self: self, logger: logger, reported: map[string]string{}, reportedChains: map[string]string{}}
}

// round logs the conflicts one check found that are not logged as they
// stand now.
func (l *fleetLog) round(conflicts []fleet.Conflict, first bool) {
	now := make(map[string]string, len(conflicts))
	for _, c := range conflicts {
		now[c.Provider] = conflictDigest(c)
	}
	// Forget conflicts that ended: one that comes back is logged again.
	maps.DeleteFunc(l.reported, func(name, _ string) bool { _, ok := now[name]; return !ok })
	for _, c := range conflicts {
		if l.reported[c.Provider] == now[c.Provider] {
			continue
		}
		l.reported[c.Provider] = now[c.Provider]
		mine := l.self.Providers[c.Provider]
		var theirs []string
		more := 0
		for _, h := range c.Definitions {
			switch {
			case h.Fingerprint == mine.Fingerprint:
			case len(theirs) == logDefinitions:
				more++
			default:
				theirs = append(theirs, text.Cut(h.Definition.String()+" on "+namedProcessors(h.Processors), logDefinitionBytes))
			}
		}
		log := l.logger.Warn
		if first {
			log = l.logger.Error
		}
		args := []any{"provider", c.Provider, "here", mine.String(), "processor", l.self.Processor, "elsewhere", theirs}
		if more > 0 {
			args = append(args, "elsewhere_not_shown", more)
		}
		log("another processor defines a provider of this name differently; fix the chain files so that they agree", args...)
	}
}

// chains logs the chain conflicts one check found that are not logged as
// they stand now, as round does the provider conflicts: at error at start,
// at warn later, once for as long as each stays the same.
func (l *fleetLog) chains(conflicts []fleet.ChainConflict, first bool) {
	now := make(map[string]string, len(conflicts))
	for _, c := range conflicts {
		now[c.Chain] = chainConflictDigest(c)
	}
	maps.DeleteFunc(l.reportedChains, func(name, _ string) bool { _, ok := now[name]; return !ok })
	for _, c := range conflicts {
		if l.reportedChains[c.Chain] == now[c.Chain] {
			continue
		}
		l.reportedChains[c.Chain] = now[c.Chain]
		mine := strings.Join(l.self.Chains[c.Chain], " ")
		var theirs []string
		more := 0
		for _, list := range c.Lists {
			joined := strings.Join(list.Providers, " ")
			switch {
			case joined == mine:
			case len(theirs) == logDefinitions:
				more++
			default:
				theirs = append(theirs, text.Cut("["+joined+"] on "+namedProcessors(list.Processors), logDefinitionBytes))
			}
		}
		log := l.logger.Warn
		if first {
			log = l.logger.Error
		}
		args := []any{"chain", c.Chain, "here", "[" + mine + "]", "processor", l.self.Processor, "elsewhere", theirs}
		if more > 0 {
			args = append(args, "elsewhere_not_shown", more)
		}
		log("another processor runs a chain of this name with different providers; its requests go to either: fix the chain files so that they agree", args...)
	}
}

// namedProcessors names at most logProcessors of processors, and how many
// more there are.
func namedProcessors(processors []string) string {
	if len(processors) <= logProcessors {
		return strings.Join(processors, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(processors[:logProcessors], ", "), len(processors)-logProcessors)
}

// conflictDigest stands for c in fleetLog's memory: it changes when a
// definition or a processor holding one does.
func conflictDigest(c fleet.Conflict) string {
	h := sha256.New()
	for _, d := range c.Definitions {
		fmt.Fprintf(h, "%s\x00", d.Fingerprint)
		for _, p := range d.Processors {
			fmt.Fprintf(h, "%s\x00", p)
		}
		h.Write([]byte{1})
	}
	return string(h.Sum(nil))
}

// chainConflictDigest stands for c in fleetLog's memory: it changes when a
// list or a processor running one does.
func chainConflictDigest(c fleet.ChainConflict) string {
	h := sha256.New()
	for _, l := range c.Lists {
		for _, p := range l.Providers {
			fmt.Fprintf(h, "%s\x00", p)
		}
		h.Write([]byte{1})
		for _, p := range l.Processors {
			fmt.Fprintf(h, "%s\x00", p)
		}
		h.Write([]byte{2})
	}
	return string(h.Sum(nil))
}

// ChainConflicts returns the chain names this processor and another
// running one run with different providers, as the last check found them.
func (p *Processor) ChainConflicts() []fleet.ChainConflict {
	p.fleetMu.Lock()
	defer p.fleetMu.Unlock()
	return slices.Clone(p.chainConflicts)
}

// Conflicts returns the provider names this processor and another running
// one define differently, as the last check found them.
func (p *Processor) Conflicts() []fleet.Conflict {
	p.fleetMu.Lock()
	defer p.fleetMu.Unlock()
	return slices.Clone(p.conflicts)
}
