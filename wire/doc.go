// Package wire is detour's wire format, shared by the processor, the publisher,
// the dead-letter tools and any Go client: the request and result types and
// their encodings (JSON, or msgpack with Content-Type application/msgpack), the
// Detour-* headers, the names of the streams and subjects, the rules a request
// id and a reply subject must follow, and the rule by which a stored result
// answers one request message (MarkAnswers, Answers).
//
// Everything read here is outside input: DecodeRequest bounds a body (its
// nesting, its declared lengths, its ids, subjects, numbers, metadata and
// schema size) before it costs anything, and errors wrap ErrBadRequest or
// ErrBadReplySubject with a reason fit for a dead letter and a failed result,
// in the words of docs/requests.md: the field, what it must be and what it is.
// Compiling a request's response_schema, the one costly step, is
// Decoded.ChainRequest, the only way to the request a chain runs.
//
// The contract is written for users in docs/requests.md and docs/results.md.
// wire depends on nats.go only for its header and message types; it knows no
// connection, stream or consumer.
package wire
