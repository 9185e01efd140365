package service

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/ask"
	"github.com/detourhq/detour/internal/fleet"
	"github.com/detourhq/detour/internal/wait"
)

const (
	// fleetReplies is how long a check waits for other processors to
	// announce what they run.
	fleetReplies = 500 * time.Millisecond
	// fleetEvery spaces the checks after the first, which runs at start.
	fleetEvery = 30 * time.Second
)

// watchFleet compares this processor's providers with those every other
// running processor announces, at start and every fleetEvery until ctx
// ends. A conflict found at start is logged at error, naming both
// definitions: this processor is the newcomer whose chain file differs.
// One found later (another processor started since) is logged at warn,
// once. detour_config_conflicts counts the provider names in conflict.
func (p *Processor) watchFleet(ctx context.Context) {
	self := fleet.Instance{Processor: p.id, Providers: fleet.Definitions(p.opts.File)}
	reported := map[string]bool{}
	for first := true; ; first = false {
		others, err := fleet.Discover(ctx, p.opts.Conn, ask.ServiceName, fleetReplies)
		if err != nil && ctx.Err() == nil {
			p.opts.Logger.Warn("asking other processors what they run", "err", err)
		}
		others = slices.DeleteFunc(others, func(in fleet.Instance) bool { return in.Processor == p.id })
		conflicts := fleet.Involving(fleet.Conflicts(append(others, self)), p.id)
		p.fleetMu.Lock()
		p.conflicts = conflicts
		p.fleetMu.Unlock()
		p.opts.Metrics.ConfigConflicts(len(conflicts))
		for _, c := range conflicts {
			if reported[c.String()] {
				continue
			}
			reported[c.String()] = true
			mine := self.Providers[c.Provider]
			var theirs []string
			for _, h := range c.Definitions {
				if h.Fingerprint != mine.Fingerprint {
					theirs = append(theirs, h.Definition.String()+" on "+strings.Join(h.Processors, ", "))
				}
			}
			log := p.opts.Logger.Warn
			if first {
				log = p.opts.Logger.Error
			}
			log("another processor defines a provider of this name differently; fix the chain files so that they agree",
				"provider", c.Provider, "here", mine.String(), "processor", p.id, "elsewhere", theirs)
		}
		if wait.Sleep(ctx, fleetEvery) != nil {
			return
		}
	}
}

// Conflicts returns the provider names this processor and another running
// one define differently, as the last check found them.
func (p *Processor) Conflicts() []fleet.Conflict {
	p.fleetMu.Lock()
	defer p.fleetMu.Unlock()
	return slices.Clone(p.conflicts)
}
