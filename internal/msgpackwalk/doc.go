// Package msgpackwalk walks msgpack bytes without decoding them: where a value
// ends, whether a body is safe to hand to a decoder, the entries of a map and
// the elements of an array as offsets, and what kind of value a value is, in
// words. The msgpack decoder sizes a slice from its declared length before
// reading any element, so a 5-byte array header (0xdd ff ff ff ff) would make
// it allocate 2^32 elements and the process die of an out-of-memory fatal
// error, which no recover catches. Request decoding (stream) and dead-letter
// tooling (deadletter) read outside msgpack through this one walker.
package msgpackwalk
