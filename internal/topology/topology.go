package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrGone marks an error its caller found to mean a resource does not
// exist; Gone reports it as such.
var ErrGone = errors.New("does not exist")

// Gone reports whether err says that a stream, bucket or consumer does not
// exist: a publish no stream takes (no stream response, or no responders),
// a read the API answers so, or an error wrapping ErrGone.
func Gone(err error) bool {
	return errors.Is(err, ErrGone) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted)
}

// Replace publishes data to subject if the subject's last message is still
// at sequence rev (0: the subject has none), with a per-message TTL of ttl
// (whole seconds, at least 1 s; the stream must allow message TTLs). It is
// one atomic step, as kv.Update is, but kv.Update would make a key
// permanent: this is how a KV key with a TTL is replaced (ADR-43). It
// returns the new message's sequence. A conflict (another write came
// first) is reported wrapping jetstream.ErrKeyRevisionMismatch.
func Replace(ctx context.Context, js jetstream.JetStream, subject string, data []byte, rev uint64, ttl time.Duration) (uint64, error) {
	ack, err := js.Publish(ctx, subject, data, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, fmt.Errorf("%w: %w", jetstream.ErrKeyRevisionMismatch, err)
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
