package serverclock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/cmd/processor/internal/serverclock"
	"github.com/detourhq/detour/internal/natstest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestTheShortestRoundTripCounts: of the latest samples, the one whose
// reply came back soonest gives the offset, so a slow reply does not move
// it; a sample whose reply came before its request says nothing.
func TestTheShortestRoundTripCounts(t *testing.T) {
	local := t0
	c := serverclock.New(func() time.Time { return local }, nil, nil)
	if c.Offset() != 0 || !c.Now().Equal(t0) {
		t.Fatalf("before any sample: offset %v, now %v; want 0 and the local time", c.Offset(), c.Now())
	}
	// The server is 2 min behind; a 10 ms round trip reads it within 5 ms.
	c.Observe(t0, t0.Add(10*time.Millisecond), t0.Add(-2*time.Minute+5*time.Millisecond))
	if got := c.Offset(); got != -2*time.Minute {
		t.Fatalf("offset %v, want -2m", got)
	}
	// A slow reply, whose server time could be anywhere in 2 s, is not
	// believed over the fast one.
	c.Observe(t0, t0.Add(2*time.Second), t0.Add(-2*time.Minute+1900*time.Millisecond))
	if got := c.Offset(); got != -2*time.Minute {
		t.Fatalf("after a slow sample: offset %v, want -2m still", got)
	}
	c.Observe(t0.Add(time.Second), t0, t0.Add(time.Hour))
	c.Observe(t0, t0, time.Time{})
	if got := c.Offset(); got != -2*time.Minute {
		t.Fatalf("after samples that say nothing: offset %v, want -2m still", got)
	}
	if want := t0.Add(-2 * time.Minute); !c.Now().Equal(want) {
		t.Fatalf("now %v, want the server's, %v", c.Now(), want)
	}
}

// TestAStepIsFollowedWithinAWindow: once the samples of an earlier offset
// have left the window, a new offset stands, however fast they were.
func TestAStepIsFollowedWithinAWindow(t *testing.T) {
	c := serverclock.New(func() time.Time { return t0 }, nil, nil)
	c.Observe(t0, t0, t0.Add(time.Minute)) // a round trip of 0: the best there is
	for i := range 12 {
		if i < 11 && c.Offset() != time.Minute {
			t.Fatalf("sample %d: offset %v, want the fast sample's 1m", i, c.Offset())
		}
		c.Observe(t0, t0.Add(4*time.Millisecond), t0.Add(2*time.Millisecond))
	}
	if got := c.Offset(); got != 0 {
		t.Fatalf("after a window of new samples: offset %v, want 0", got)
	}
}

// TestAClockFarOffIsLogged: an offset over a second is logged at warn,
// once, and again only when it moves by another second; back within a
// second, the agreement is logged once.
func TestAClockFarOffIsLogged(t *testing.T) {
	var logs bytes.Buffer
	c := serverclock.New(func() time.Time { return t0 }, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	offsets := []time.Duration{300 * time.Millisecond, 2 * time.Minute, 2*time.Minute + 200*time.Millisecond, 0, 0}
	for _, o := range offsets {
		c.Observe(t0, t0, t0.Add(o))
		// Each sample is as fast as the last, and so the newest counts.
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "server_ahead_by=2m0s") {
		t.Errorf("warnings:\n%s\nwant one, for the 2m offset", out)
	}
	if n := strings.Count(out, "agrees with the NATS server's again"); n != 1 {
		t.Errorf("log:\n%s\nwant the agreement once", out)
	}
}

// TestBucketTimeReadsTheServersClock: against a real server, a local clock
// two minutes fast is learned as an offset of about minus two minutes.
func TestBucketTimeReadsTheServersClock(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "clock_test"})
	if err != nil {
		t.Fatal(err)
	}
	c := serverclock.New(func() time.Time { return time.Now().Add(2 * time.Minute) }, serverclock.BucketTime(kv), nil)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if off := c.Offset(); off > -2*time.Minute+time.Second || off < -2*time.Minute-time.Second {
		t.Fatalf("offset %v, want about -2m", off)
	}
	if d := time.Since(c.Now()); d > time.Second || d < -time.Second {
		t.Fatalf("now is %v off the real time, want within a second", d)
	}
}
