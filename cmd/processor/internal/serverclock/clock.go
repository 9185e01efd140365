package serverclock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/logs"
	"github.com/detourhq/detour/internal/wait"
)

const (
	syncEvery = 5 * time.Second // how often Run asks the server
	// window is how many of the latest samples the estimate is chosen
	// from: a minute of them, so a clock stepped by NTP is followed within
	// a minute, and a slow reply or two do not move the estimate.
	window = 12
	// farOff is the offset past which a processor logs its clock as off
	// the server's: more than a round trip or two explains.
	farOff      = time.Second
	syncTimeout = 5 * time.Second
)

// Source asks the server for its time: a reply the server stamps, such as
// a KV bucket's status (BucketTime).
type Source func(ctx context.Context) (time.Time, error)

// BucketTime is a Source that reads the time in the status of bucket kv:
// the server's time when it gathered the info of the bucket's stream
// (jetstream.StreamInfo.TimeStamp).
func BucketTime(kv jetstream.KeyValue) Source {
	return func(ctx context.Context) (time.Time, error) {
		st, err := kv.Status(ctx)
		if err != nil {
			return time.Time{}, err
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return time.Time{}, errors.New("serverclock: a bucket status without its stream's info")
		}
		return bs.StreamInfo().TimeStamp, nil
	}
}

type sample struct {
	offset, roundTrip time.Duration
}

// Clock is the server's time as this processor reads it: its local clock
// plus the offset learned from the server. The zero offset stands until the
// first sample. It is safe for concurrent use.
type Clock struct {
	local  func() time.Time
	source Source
	logger *slog.Logger

	mu      sync.Mutex
	samples []sample // the latest window, newest first
	offset  time.Duration
	logged  time.Duration // the offset last reported far off; 0: agrees
}

// New returns a clock on local (nil: time.Now) that asks source for the
// server's time, and logs to logger (nil discards) when they are far apart.
func New(local func() time.Time, source Source, logger *slog.Logger) *Clock {
	if local == nil {
		local = time.Now
	}
	return &Clock{local: local, source: source, logger: logs.OrDiscard(logger)}
}

// Now is the server's time as the clock reads it.
func (c *Clock) Now() time.Time { return c.local().Add(c.Offset()) }

// Offset is how far the server's clock is ahead of the local one (negative
// when it is behind), as estimated.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Sync takes one sample of the server's clock.
func (c *Clock) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	sent := c.local()
	server, err := c.source(ctx)
	received := c.local()
	if err != nil {
		return fmt.Errorf("serverclock: asking the server's time: %w", err)
	}
	c.Observe(sent, received, server)
	return nil
}

// Run takes a sample every few seconds until ctx ends, and returns nil
// then. A sample that fails is skipped: the last estimate stands.
func (c *Clock) Run(ctx context.Context) error {
	for wait.Sleep(ctx, syncEvery) == nil {
		_ = c.Sync(ctx)
	}
	return nil
}

// Observe adds the server's time server, read by a request sent and
// answered at the local times sent and received. A reading without a time,
// or whose reply came before its request by the local clock (stepped
// meanwhile), says nothing and is ignored.
func (c *Clock) Observe(sent, received, server time.Time) {
	if server.IsZero() || received.Before(sent) {
		return
	}
	roundTrip := received.Sub(sent)
	s := sample{offset: server.Sub(sent.Add(roundTrip / 2)), roundTrip: roundTrip}
	c.mu.Lock()
	c.samples = slices.Insert(c.samples[:min(len(c.samples), window-1)], 0, s)
	// Of round trips alike, the newest sample counts: MinFunc takes the first.
	best := slices.MinFunc(c.samples, func(a, b sample) int { return cmp.Compare(a.roundTrip, b.roundTrip) })
	c.offset = best.offset
	far := c.offset.Abs() > farOff
	farAgain := far && (c.logged == 0 || (c.offset-c.logged).Abs() > farOff)
	agrees := !far && c.logged != 0
	switch {
	case farAgain:
		c.logged = c.offset
	case agrees:
		c.logged = 0
	}
	c.mu.Unlock()
	// Logged when far off, for the first time or by another second since
	// the last line, and when back within farOff after that.
	switch {
	case farAgain:
		c.logger.Warn("this processor's clock is off the NATS server's; cooldowns, probe leases and deadlines are judged by the server's",
			"server_ahead_by", best.offset, "within", best.roundTrip/2)
	case agrees:
		c.logger.Info("this processor's clock agrees with the NATS server's again", "server_ahead_by", best.offset)
	}
}
