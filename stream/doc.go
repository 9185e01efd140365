// Package stream is the consume loop that takes each delivery of detour's
// requests stream (created by package topology) through its life:
// decode, check the deadline, skip what was already answered, run the chain
// with InProgress heartbeats, then publish and ack, NAK with a delay, or
// dead-letter with a reason.
//
// The wire format is package wire's.
//
// stream makes no provider decisions: the chain does, and reports them in an
// *chain.ExhaustedError that stream turns into a delay or a dead letter.
package stream
