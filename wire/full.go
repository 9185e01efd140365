package wire

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrFull marks a request that RequestsStream refused for want of room (its
// byte or message limit, or the server's whole store), so that those queued
// keep room for their results; publish again once processors answered some.
var ErrFull = errors.New(RequestsStream + " is full: requests are refused until processors have answered some of those queued")

// nats-server's errors.json codes for no room: JSStreamStoreFailedF, with
// the store's own error, and JSInsufficientResourcesErr, a full store.
const (
	jsErrStoreFailed           jetstream.ErrorCode = 10077
	jsErrInsufficientResources jetstream.ErrorCode = 10023
)

// fullStore maps the store's errors of a stream full with discard new
// (nats-server's ErrMaxBytes, ErrMaxMsgs) to the limit reached.
var fullStore = map[string]string{
	"maximum bytes exceeded":    "DETOUR_REQUESTS_MAX_BYTES",
	"maximum messages exceeded": "the message limit an operator set",
}

// Full returns an error wrapping ErrFull that says which limit was reached,
// when err, from a publish to a stream, is its refusal for want of room
// (which waiting a moment does not make); nil otherwise.
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
