package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/coalesce"
	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/wait"
	"github.com/detourhq/detour/wire"
)

const (
	// repairEvery is the least time between two checks: a worker failing
	// sooner shares the last check's outcome.
	repairEvery = 500 * time.Millisecond
	// repairTimeout bounds one check and its re-creation.
	repairTimeout = 10 * time.Second
	// RecreatePause is how long a stream or bucket found gone is left before
	// it is created again: one created again while the server may still be
	// ending the deleted one now and then never stores a message (3 of 40
	// runs of stream's TestConsumeRecreatesTheRequestsStream; none of 40
	// with the pause).
	RecreatePause = time.Second
)

// Repairer puts back, with Ensure, a consumer or stream found gone:
// deleted by an operator or lost with a server's store. Its methods are
// safe for concurrent use; a nil *Repairer repairs nothing.
type Repairer struct {
	js   jetstream.JetStream
	topo Streams
	log  *slog.Logger
	gate coalesce.Gate // one check for every worker that finds the same gap
}

// NewRepairer returns a Repairer of the streams t; a nil logger discards.
func NewRepairer(js jetstream.JetStream, t Streams, logger *slog.Logger) *Repairer {
	logger = logs.OrDiscard(logger)
	return &Repairer{js: js, topo: t, log: logger, gate: coalesce.Gate{Every: repairEvery, Timeout: repairTimeout}}
}

// Ensure checks the topology and recreates what is missing, logged once at
// warn. Callers at once, or within repairEvery, share one check's outcome.
// It returns nil when everything is in place.
func (r *Repairer) Ensure(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.gate.Do(ctx, r.repair)
}

func (r *Repairer) repair(ctx context.Context) error {
	missing, streamGone, err := r.missing(ctx)
	if err != nil {
		return err // unreachable or busy: the caller's own error says so
	}
	if len(missing) == 0 {
		return nil
	}
	r.log.Warn("topology incomplete; recreating it", "missing", missing)
	if streamGone {
		if err := wait.Sleep(ctx, RecreatePause); err != nil {
			return err
		}
	}
	if err := Ensure(ctx, r.js, r.topo); err != nil {
		r.log.Warn("recreating the topology failed; will try again", "missing", missing, "err", err)
		return err
	}
	r.log.Info("topology recreated", "recreated", missing)
	return nil
}

// missing names the streams, subjects and consumers the server lacks, and
// reports whether a stream is among them.
func (r *Repairer) missing(ctx context.Context) (missing []string, streamGone bool, err error) {
	requestsGone := false
	for _, name := range []string{wire.RequestsStream, wire.ResultsStream, wire.DeadLetterStream} {
		s, err := r.js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			missing = append(missing, "stream "+name)
			streamGone = true
			requestsGone = requestsGone || name == wire.RequestsStream
		case err != nil:
			return nil, false, fmt.Errorf("topology: checking %s: %w", name, err)
		case name == wire.RequestsStream:
			// Another processor's update at the same moment can leave
			// out a chain of this one's.
			for _, c := range r.topo.Chains {
				if !slices.Contains(s.CachedInfo().Config.Subjects, wire.RequestSubject(c)) {
					missing = append(missing, "subject "+wire.RequestSubject(c))
				}
			}
		}
	}
	for _, c := range r.topo.Chains {
		if requestsGone {
			missing = append(missing, "consumer "+wire.ConsumerName(c))
			continue
		}
		_, err := r.js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(c))
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			missing = append(missing, "consumer "+wire.ConsumerName(c))
		case err != nil:
			return nil, false, fmt.Errorf("topology: checking consumer %s: %w", wire.ConsumerName(c), err)
		}
	}
	return missing, streamGone, nil
}
