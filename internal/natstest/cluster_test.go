package natstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
)

// TestClusterSurvivesTheLossOfAStreamLeader checks the helpers: an R3 stream
// on a three-node cluster elects a new leader among the survivors when its
// leader is stopped, and keeps what was stored before.
func TestClusterSurvivesTheLossOfAStreamLeader(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	names := map[string]bool{}
	for _, s := range servers {
		names[s.Name()] = true
	}
	if len(names) != 3 {
		t.Fatalf("server names %v, want 3 distinct", names)
	}
	nc, err := nats.Connect(natstest.ClusterURLs(servers), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.before", []byte("1")); err != nil {
		t.Fatal(err)
	}

	old := natstest.StreamLeader(t, servers, "T")
	if natstest.ServerNamed(servers, old.Name()) != old {
		t.Fatalf("ServerNamed(%q) is not the leader", old.Name())
	}
	natstest.Stop(old)
	if old.Running() {
		t.Fatal("stopped server still running")
	}
	stopped := time.Now()
	next := natstest.StreamLeader(t, servers, "T")
	if next == old {
		t.Fatalf("leader still %s after stopping it", old.Name())
	}
	t.Logf("leader %s stopped; %s leads after %s", old.Name(), next.Name(), time.Since(stopped).Round(time.Millisecond))

	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, "t.after", []byte("2"))
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("publishing after the loss: %v", err)
		}
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
	if _, err := s.GetLastMsgForSubject(ctx, "t.before"); errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal("message stored before the loss is gone")
	}
}
