package wire

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrFull marks a request that RequestsStream refused for want of room: it
// holds DETOUR_REQUESTS_MAX_BYTES of requests not yet answered (or as many
// messages as an operator allowed), or the server's whole JetStream store
// is full. Requests are refused then so that the results and dead letters
// of those queued keep their room; it is worth publishing again once
// processors have answered some.
var ErrFull = errors.New(RequestsStream + " is full: requests are refused until processors have answered some of those queued")

// JetStream's error codes for a message a stream or the server has no room
// for (nats-server's errors.json): JSStreamStoreFailedF carries the store's
// own error, which says so for a stream's limit; JSInsufficientResourcesErr
// is a server whose store is full.
const (
	jsErrStoreFailed           jetstream.ErrorCode = 10077
	jsErrInsufficientResources jetstream.ErrorCode = 10023
)

// fullStore maps the store's errors of a stream full with discard new
// (nats-server's ErrMaxBytes, ErrMaxMsgs), carried by JSStreamStoreFailedF,
// to the limit reached.
var fullStore = map[string]string{
	"maximum bytes exceeded":    "DETOUR_REQUESTS_MAX_BYTES",
	"maximum messages exceeded": "the message limit an operator set",
}

// NoRoom reports whether err, from a publish to a stream, is its refusal
// for want of room: the stream full with discard new, or the server's whole
// store full. Waiting a moment does not make room; answering queued
// requests, or their dead letters ageing out, does.
func NoRoom(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrInsufficientResources ||
		apiErr.ErrorCode == jsErrStoreFailed && fullStore[apiErr.Description] != "")
}

// Full returns an error wrapping ErrFull that says which limit was reached,
// when err, from a publish to RequestsStream, is its refusal for want of
// room; nil otherwise.
func Full(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case !errors.As(err, &apiErr):
		return nil
	case apiErr.ErrorCode == jsErrInsufficientResources:
		return fmt.Errorf("%w (the server's JetStream store is full: %s)", ErrFull, apiErr.Description)
	case apiErr.ErrorCode == jsErrStoreFailed && fullStore[apiErr.Description] != "":
		return fmt.Errorf("%w (%s: %s reached)", ErrFull, apiErr.Description, fullStore[apiErr.Description])
	}
	return nil
}
