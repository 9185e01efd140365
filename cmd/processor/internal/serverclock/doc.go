// Package serverclock keeps the NATS server's time as a processor reads
// it. Processors whose own clocks differ by minutes must agree on when a
// cooldown, a probe lease or a deadline ends (docs/state.md), so every one of
// them judges those by the server's clock, the one that stamps JetStream's
// entries and messages, and not by its own.
//
// A Clock learns the offset of the server's clock from the local one from
// replies the server stamps with its time (a bucket's status, whose stream
// info's ts is when the server gathered it), each bracketed by the local times of its
// request and its reply: the server's time lies between them, so the
// sample with the shortest round trip among the latest is the best
// estimate, within half that round trip (NTP's reasoning, RFC 5905 §8).
// Clock.Run takes a sample every few seconds; a clock stepped meanwhile is
// followed within a window of samples.
package serverclock
