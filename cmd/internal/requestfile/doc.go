// Package requestfile reads requests files: JSON Lines, one request a line
// in the shape of docs/requests.md, or "prompt" in place of "messages". The
// publisher sends them (publisher -f) and the processor's check command asks
// each provider with them (processor check -samples), so both read them
// here, by one set of rules.
//
// Every line is checked as a processor checks a request, so that a line it
// would dead-letter stops the run before anything is sent; the errors speak
// of the line's fields and columns, never of Go types (*FileError, one
// *LineError a bad line).
package requestfile
