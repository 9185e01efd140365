package service_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// TestPublisherRidesOutAServerRestart: the server is down for 5 s while a
// run publishes 500 requests at 100 per second. The client retries each
// failed publish with backoff (the same Nats-Msg-Id, so nothing is queued
// twice) instead of giving up at the first timeout; all 500 are answered,
// each exactly once.
func TestPublisherRidesOutAServerRestart(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	store := t.TempDir()
	srv := natstest.StartWith(t, &server.Options{StoreDir: store})
	port := srv.Addr().(*net.TCPAddr).Port
	url := srv.ClientURL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, nc: nc, js: js}
	settings := testSettings()
	settings.AckWait = 5 * time.Second // a delivery whose ack was lost comes back soon
	for range 2 {
		h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), settings)
	}

	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	reqs := make([]wire.Request, n)
	for i := range reqs {
		reqs[i] = wire.Request{ID: fmt.Sprintf("r%03d", i), Messages: []chain.Message{{Role: "user", Content: "hello"}}}
	}
	var published, retries atomic.Int64
	done := make(chan struct{})
	var outcomes []client.Outcome
	var runErr error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		outcomes, runErr = c.PublishAll(ctx, "default", reqs, client.Options{
			Wait: true, Rate: 100, Timeout: time.Minute,
			OnPublished: func(client.Outcome) { published.Add(1) },
			OnRetry:     func(error) { retries.Add(1) },
		})
	}()

	eventually(t, 10*time.Second, "100 requests published", func() bool { return published.Load() >= 100 })
	srv.Shutdown()
	srv.WaitForShutdown()
	downAt := published.Load()
	time.Sleep(5 * time.Second)
	natstest.StartWith(t, &server.Options{StoreDir: store, Port: port})
	<-done

	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	for _, o := range outcomes {
		if o.Err != nil || o.Result.Status != chain.StatusOK {
			t.Fatalf("request %s: %+v (err %v)", o.ID, o.Result, o.Err)
		}
	}
	results, err := h.js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := results.Info(context.Background(), jetstream.WithSubjectFilter(wire.ResultSubject(">")))
	if err != nil {
		t.Fatal(err)
	}
	for subject, count := range info.State.Subjects {
		if count != 1 {
			t.Errorf("%s holds %d results, want 1", subject, count)
		}
	}
	if len(info.State.Subjects) != n || info.State.Msgs != n {
		t.Fatalf("%d results under %d subjects, want %d, one each", info.State.Msgs, len(info.State.Subjects), n)
	}
	t.Logf("server down after %d published; %d publish retries; %d provider calls for %d requests", downAt, retries.Load(), solo.Requests(), n)
}
