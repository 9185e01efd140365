package service

import (
	"context"
	"net/http"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/kvstate"
)

// keptEvents is how many outage events the status page lists.
const keptEvents = 20

// Handler serves DETOUR_METRICS_ADDR: /metrics, /healthz, /readyz (from
// Ready), and the status page on / with its data on /status.json.
func (p *Processor) Handler() http.Handler {
	mux := http.NewServeMux()
	m := p.opts.Metrics.Handler(p.Ready)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		mux.Handle(path, m)
	}
	page := statuspage.Handler(p.snapshot)
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /status.json", page)
	return mux
}

// snapshot is the status page's data now.
func (p *Processor) snapshot() statuspage.Snapshot {
	now := p.clock.Now()
	perSecond, degraded := p.opts.Metrics.Rates(now)
	p.fleetMu.Lock()
	conflicts, chainConflicts := p.conflicts, p.chainConflicts
	p.fleetMu.Unlock()
	return statuspage.Snapshot{
		Now:            now.UTC(),
		Processor:      p.id,
		Providers:      statuspage.Rows(now, p.store.Status(now, p.known()...), p.own...),
		Events:         p.events.Latest(),
		PerSecond:      perSecond,
		DegradedShare:  degraded,
		Conflicts:      fleet.WithCircuits(conflicts, p.store.Holder),
		ChainConflicts: chainConflicts,
	}
}

// watchEvents keeps the latest outage events until ctx ends.
func (p *Processor) watchEvents(ctx context.Context) {
	if err := kvstate.WatchEvents(ctx, p.kv, nil, nil, p.events.Add); err != nil && ctx.Err() == nil {
		p.opts.Logger.Warn("the status page lists no outage events: watching the bucket failed", "err", err)
	}
}
