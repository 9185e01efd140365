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

	"github.com/detourhq/detour/cmd/processor/internal/ask"
	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/internal/text"
	"github.com/detourhq/detour/internal/wait"
)

const (
	// fleetReplies is how long a check waits for other processors to
	// announce what they run.
	fleetReplies = 500 * time.Millisecond
	// fleetEvery spaces the checks after the first, which runs at start.
	fleetEvery = 30 * time.Second
)

// Bounds of one conflict's log line: a forged announcement can hold
// thousands of definitions and processors, and every processor logs it.
const (
	// logDefinitions is the most definitions from elsewhere one line names.
	logDefinitions = 4
	// logProcessors is the most processors named for one definition.
	logProcessors = 4
	// logDefinitionBytes bounds one definition with its processors.
	logDefinitionBytes = 400
)

// watchFleet compares this processor's providers and chains with those
// every other running processor announces, at start and every fleetEvery
// until ctx ends, and keeps its definitions' circuits from what it finds
// (circuitKeeper). detour_config_conflicts counts the provider and the
// chain names in conflict; fleetLog says which conflicts are logged.
func (p *Processor) watchFleet(ctx context.Context) {
	self := fleet.Instance{Processor: p.id, Providers: fleet.Definitions(p.opts.File), Chains: fleet.Chains(p.opts.File)}
	l := newFleetLog(self, p.opts.Logger)
	every := p.opts.fleetEvery
	if every <= 0 {
		every = fleetEvery
	}
	for first := true; ; first = false {
		all, err := fleet.Discover(ctx, p.opts.Conn, ask.ServiceName, fleetReplies)
		if err != nil && ctx.Err() == nil {
			p.opts.Logger.Warn("asking other processors what they run", "err", err)
		}
		others := slices.DeleteFunc(slices.Clone(all), func(in fleet.Instance) bool { return in.Processor == p.id })
		if ctx.Err() == nil {
			p.keeper.round(ctx, others, complete(all, err))
		}
		everyone := append(others, self)
		conflicts := fleet.Involving(fleet.Conflicts(everyone), p.id)
		chainConflicts := fleet.ChainsInvolving(fleet.ChainConflicts(everyone), p.id)
		p.fleetMu.Lock()
		p.conflicts, p.chainConflicts = conflicts, chainConflicts
		p.fleetMu.Unlock()
		p.opts.Metrics.ConfigConflicts(len(conflicts))
		p.opts.Metrics.ChainConflicts(len(chainConflicts))
		l.round(others, conflicts, first)
		l.chains(chainConflicts, first)
		if wait.Sleep(ctx, every) != nil {
			return
		}
	}
}

// complete reports whether a check that found all, with err, may judge
// that a definition runs nowhere (circuitKeeper): it could ask, and no
// announcement was left out over Discover's bounds, in number of
// responders or within one.
func complete(all []fleet.Instance, err error) bool {
	return err == nil && len(all) < fleet.MaxResponders &&
		!slices.ContainsFunc(all, func(in fleet.Instance) bool { return in.Omitted > 0 })
}

// fleetLog logs the conflicts each check finds. A conflict found at start
// is logged at error, naming both sides: this processor is the newcomer
// whose chain file differs. One found later (another processor started
// since) is logged at warn, once for as long as it stays the same. What it
// remembers is one digest per provider name of this processor in conflict
// now, so announcements that change every round cost no memory that grows.
type fleetLog struct {
	self   fleet.Instance
	logger *slog.Logger
	// reported maps a provider name in conflict to the digest of the
	// conflict last logged for it; reportedChains a chain name in
	// conflict.
	reported       map[string]string
	reportedChains map[string]string
	// omitted is set once a check has said that it left definitions out.
	omitted bool
}

func newFleetLog(self fleet.Instance, logger *slog.Logger) *fleetLog {
	return &fleetLog{self: self, logger: logger, reported: map[string]string{}, reportedChains: map[string]string{}}
}

// round logs what one check found: the conflicts not logged as they stand
// now, and, once, that announcements held more than a check keeps.
func (l *fleetLog) round(others []fleet.Instance, conflicts []fleet.Conflict, first bool) {
	omitted := 0
	for _, in := range others {
		omitted += in.Omitted
	}
	if omitted > 0 && !l.omitted {
		l.omitted = true
		l.logger.Warn("announcements of other processors held more definitions than a check reads; the rest were left out",
			"left_out", omitted, "announcements", len(others))
	}
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
