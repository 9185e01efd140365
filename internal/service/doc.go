// Package service assembles a detour processor from its settings and chain
// file: the NATS connection (or an embedded server), the topology, the
// provider-state mirror, the chains and the consume loop. cmd/processor only
// calls it; tests start processors with it in-process.
package service
