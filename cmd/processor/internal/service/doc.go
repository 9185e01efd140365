// Package service assembles a detour processor from its settings, chain
// file and NATS connection (package natsconn's): the topology, the
// provider-state mirror, the chains and the consume loop. cmd/processor only
// calls it; tests start processors with it in-process.
package service
