// Package requests builds the requests of a publisher run from its flags:
// copies of a prompt (-n), or a requests file read by internal/requestfile
// (-f), and a JSON Schema file put into each (-schema), checked as a
// processor compiles it before anything is sent.
package requests
