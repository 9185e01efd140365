package chain

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// Class is the failure class of one provider attempt (docs/failures.md),
// the only input to what follows a failure: retry, count, cool down or move on.
type Class int

// The failure classes. ClassNone marks a success; ClassCooldown a provider
// skipped without a call because it is cooling.
const (
	ClassNone Class = iota
	ClassServer
	ClassTimeout
	ClassRateLimit
	ClassNetwork
	ClassAuth
	ClassRequest
	ClassInvalidOutput
	ClassCanceled
	ClassCooldown
)

var classNames = [...]string{
	ClassNone:          "",
	ClassServer:        "server",
	ClassTimeout:       "timeout",
	ClassRateLimit:     "rate_limit",
	ClassNetwork:       "network",
	ClassAuth:          "auth",
	ClassRequest:       "request",
	ClassInvalidOutput: "invalid_output",
	ClassCanceled:      "canceled",
	ClassCooldown:      "cooldown",
}

// String returns the class name used on the wire and in the KV bucket.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("class(%d)", int(c))
	}
	return classNames[c]
}

// MarshalText encodes the class by name, so results and KV values stay readable.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText decodes a class name written by MarshalText.
func (c *Class) UnmarshalText(b []byte) error {
	i := slices.Index(classNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("chain: unknown failure class %q", b)
	}
	*c = Class(i)
	return nil
}

// Retryable reports whether a failure of this class is retried on the same
// provider within one pass.
func (c Class) Retryable() bool {
	switch c {
	case ClassServer, ClassTimeout, ClassRateLimit, ClassNetwork:
		return true
	}
	return false
}

// Counts reports whether a failure of this class counts toward the provider's
// cooldown threshold. A request or output problem is not an outage; every
// class worth retrying on the provider is one, and so is a refused key.
func (c Class) Counts() bool { return c.Retryable() || c == ClassAuth }

// Classify maps a non-2xx HTTP status to its failure class before the body
// is read (docs/failures.md). Only 401 says by itself that the credential is
// refused: OpenRouter sends 402, 403 and 404 for a flagged prompt, too little
// credit or a model briefly gone too, so they count as server failures.
func Classify(status int) Class {
	switch {
	case status == http.StatusRequestTimeout:
		return ClassTimeout
	case status == http.StatusTooManyRequests:
		return ClassRateLimit
	case status == http.StatusUnauthorized:
		return ClassAuth
	case status == http.StatusPaymentRequired, status == http.StatusForbidden, status == http.StatusNotFound:
		return ClassServer
	case status >= 400 && status < 500:
		return ClassRequest
	default:
		// 5xx, 529 (overloaded) and anything a provider should never send.
		return ClassServer
	}
}

// EncodeMsgpack writes the class as a msgpack string (through MarshalText
// it would be binary, which other languages read as bytes).
func (c Class) EncodeMsgpack(enc *msgpack.Encoder) error { return enc.EncodeString(c.String()) }

// DecodeMsgpack reads a class written by EncodeMsgpack.
func (c *Class) DecodeMsgpack(dec *msgpack.Decoder) error {
	s, err := dec.DecodeString()
	if err != nil {
		return err
	}
	return c.UnmarshalText([]byte(s))
}
