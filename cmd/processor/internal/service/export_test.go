package service

import (
	"time"

	"github.com/detourhq/detour/kvstate"
)

// StoreForTest is the processor's provider-state mirror.
func (p *Processor) StoreForTest() *kvstate.Store { return p.store }

// FleetEveryForTest spaces a processor's fleet checks by d.
func FleetEveryForTest(d time.Duration) func(*Options) {
	return func(o *Options) { o.fleetEvery = d }
}
