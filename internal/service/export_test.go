package service

import "github.com/detourhq/detour/kvstate"

// StoreForTest is the processor's provider-state mirror.
func (p *Processor) StoreForTest() *kvstate.Store { return p.store }
