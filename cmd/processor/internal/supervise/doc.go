// Package supervise runs a processor's long-running parts in nested
// stages, so that the nesting says the shutdown order: the parts of an
// inner stage stop first, and those of an outer stage keep running until
// every inner part has returned. A processor's provider-state mirror, for
// one, is outside its consume loop: deliveries still draining see other
// processors' cooldowns to the end.
//
// Run keeps every failing part's error, where errgroup keeps only the
// first: a processor reports both a mirror that stopped following its
// bucket and a drain that failed after it.
package supervise
