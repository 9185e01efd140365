package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/service"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// TestBucketDeletedUnderLoadIsRecreated: deleting detour_providers under a
// steady load makes every processor's mirror stop following (not ready)
// until one of them has recreated the bucket and all follow it again; no
// request is lost or answered twice, and cooldowns work on the new bucket.
func TestBucketDeletedUnderLoadIsRecreated(t *testing.T) {
	runRepairScenario(t, repairScenario{
		part: "bucket " + kvstate.Bucket,
		remove: func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteKeyValue(ctx, kvstate.Bucket)
		},
		exists: func(ctx context.Context, js jetstream.JetStream) bool {
			_, err := js.KeyValue(ctx, kvstate.Bucket)
			return err == nil
		},
		everyUnready: true,
	})
}

// TestResultsStreamDeletedUnderLoadIsRecreated: deleting DETOUR_RESULTS
// under a steady load makes the answer path recreate it and store again; the
// processor that failed to store was not ready meanwhile. Results stored
// before the deletion go with the stream, so each request names a reply
// subject, which gets the result only once it is stored: every request gets
// exactly one reply.
func TestResultsStreamDeletedUnderLoadIsRecreated(t *testing.T) {
	runRepairScenario(t, repairScenario{
		part: "stream " + wire.ResultsStream,
		remove: func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, wire.ResultsStream)
		},
		exists: func(ctx context.Context, js jetstream.JetStream) bool {
			_, err := js.Stream(ctx, wire.ResultsStream)
			return err == nil
		},
		resultsLost: true,
	})
}

// TestConsumerDeletedUnderLoadIsRecreated: deleting the durable consumer
// detour-default under a steady load makes the pulls fail (not ready) until
// a processor recreates it; the requests waiting in the stream are all
// answered, each result stored once.
func TestConsumerDeletedUnderLoadIsRecreated(t *testing.T) {
	runRepairScenario(t, repairScenario{
		part: "consumer " + wire.ConsumerName("default"),
		remove: func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteConsumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
		},
		exists: func(ctx context.Context, js jetstream.JetStream) bool {
			_, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
			return err == nil
		},
	})
}

// repairScenario is one part of the topology deleted under load.
type repairScenario struct {
	part   string
	remove func(context.Context, jetstream.JetStream) error
	exists func(context.Context, jetstream.JetStream) bool
	// everyUnready: every processor must have been unready, not just one.
	everyUnready bool
	// resultsLost: the deletion takes the results stored before it; the
	// requests name reply subjects, and the replies are counted instead.
	resultsLost bool
}

// repairChain is primary then backup; primary, called once per request,
// trips after 3 failures.
func repairChain(primaryURL, backupURL string) string {
	return fmt.Sprintf(`
providers:
  - name: primary
    type: openai
    base_url: %s
    model: primary-model
    max_retries: 0
    failure_threshold: 3
    cooldown: 60s
  - name: backup
    type: openai
    base_url: %s
    model: backup-model
chains:
  default: [primary, backup]
`, primaryURL, backupURL)
}

const replyPrefix = "_INBOX.repair."

func runRepairScenario(t *testing.T, sc repairScenario) {
	primary := providertest.New(providertest.OpenAI, providertest.OK())
	defer primary.Close()
	backup := providertest.New(providertest.OpenAI, providertest.OK())
	defer backup.Close()
	h := newHarness(t)
	file := parseChainFile(t, repairChain(primary.URL, backup.URL))
	a := h.startProcessor(file, testSettings())
	b := h.startProcessor(file, testSettings())
	ctx := context.Background()
	eventually(t, 10*time.Second, "both processors ready", func() bool { return a.Ready() && b.Ready() })

	replies := h.countReplies()
	reply := ""
	if sc.resultsLost {
		reply = replyPrefix
	}
	load := h.startLoad("load", 20*time.Millisecond, reply)
	eventually(t, 10*time.Second, "some requests answered before the deletion", func() bool {
		return h.storedResults() >= 10
	})

	ready := sampleReadiness(a, b)
	if err := sc.remove(ctx, h.js); err != nil {
		t.Fatalf("deleting %s: %v", sc.part, err)
	}
	deleted := time.Now()
	eventually(t, 20*time.Second, sc.part+" recreated and the processors ready again after a dip", func() bool {
		wentDown := ready.anyUnready()
		if sc.everyUnready {
			wentDown = ready.allUnready()
		}
		return wentDown && sc.exists(ctx, h.js) && a.Ready() && b.Ready()
	})
	t.Logf("%s back and both processors ready %v after its deletion; unready for A %v, B %v",
		sc.part, time.Since(deleted).Round(time.Millisecond), ready.unreadyFor(0), ready.unreadyFor(1))
	ready.stop()

	// Keep the load on a while after the repair, then check every request.
	recovered := load.published()
	eventually(t, 10*time.Second, "load after the repair", func() bool { return load.published() >= recovered+25 })
	ids := load.stop()
	if sc.resultsLost {
		eventually(t, 30*time.Second, "a reply to every request", func() bool { return replies.distinct() >= len(ids) })
		for _, id := range ids {
			if n := replies.count(replyPrefix + id); n != 1 {
				t.Errorf("%s: %d replies, want 1", id, n)
			}
		}
		stored := h.resultsPerSubject()
		for i, id := range ids {
			n := stored[wire.ResultSubject(id)]
			if n > 1 || (i >= recovered && n != 1) {
				t.Errorf("%s (published %s the repair): %d results stored", id, map[bool]string{true: "after", false: "before"}[i >= recovered], n)
			}
		}
	} else {
		var stored map[string]uint64
		eventually(t, 30*time.Second, "a stored result for every request", func() bool {
			stored = h.resultsPerSubject()
			for _, id := range ids {
				if stored[wire.ResultSubject(id)] == 0 {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			if n := stored[wire.ResultSubject(id)]; n != 1 {
				t.Errorf("%s: %d results stored, want 1", id, n)
			}
		}
	}
	t.Logf("%d requests published, each answered once", len(ids))

	checkCooldownShared(t, h, primary, a, b)
}

// checkCooldownShared makes primary fail and sends requests one at a time
// until it trips: exactly threshold calls reach it, the processor that did
// not open the cooldown shows it within 100 ms of the one that did, and
// neither calls primary again.
func checkCooldownShared(t *testing.T, h *harness, primary *providertest.Server, a, b *service.Processor) {
	t.Helper()
	primary.SetScript(providertest.Status(503))
	before := primary.Requests()
	seen := watchCooling(a, b, "primary")
	// The opener's mirror holds the cooldown before the tripping request's
	// result is stored, so asking the mirrors after each result sends no
	// request past the trip.
	cooling := func() bool {
		_, okA := a.StoreForTest().Cooling("primary", time.Now())
		_, okB := b.StoreForTest().Cooling("primary", time.Now())
		return okA || okB
	}
	for i := 0; !cooling(); i++ {
		if i == 10 {
			t.Fatal("primary never tripped")
		}
		id := fmt.Sprintf("trip-%d", i)
		h.publish("default", request(id, "hello"))
		if res, _ := h.waitResult(id, 10*time.Second); res.Provider != "backup" {
			t.Fatalf("%s answered by %q, want backup", id, res.Provider)
		}
	}
	lag := seen.lag(t)
	t.Logf("the second mirror showed the cooldown %v after the first", lag)
	if lag > 100*time.Millisecond {
		t.Fatalf("the second mirror showed the cooldown %v after the first, want within 100ms", lag)
	}
	if got := primary.Requests() - before; got != 3 {
		t.Fatalf("primary got %d calls before it tripped, want 3", got)
	}
	for i := range 10 {
		id := fmt.Sprintf("after-%d", i)
		h.publish("default", request(id, "hello"))
		res, _ := h.waitResult(id, 10*time.Second)
		if res.Provider != "backup" || res.Attempts[0].Class != chain.ClassCooldown {
			t.Fatalf("%s: provider %q, first attempt %+v; want backup after a cooldown skip", id, res.Provider, res.Attempts[0])
		}
	}
	if got := primary.Requests() - before; got != 3 {
		t.Fatalf("primary got %d calls in all, want 3: its cooldown was not honoured", got)
	}
}

// coolingSeen is when each of two mirrors first showed a provider cooling,
// polled on one clock.
type coolingSeen struct {
	mu    sync.Mutex
	first [2]time.Time
	done  chan struct{}
}

func watchCooling(a, b *service.Processor, provider string) *coolingSeen {
	s := &coolingSeen{done: make(chan struct{})}
	go func() { // ends once both have shown it, or after 30 s
		defer close(s.done)
		stores := [2]*kvstate.Store{a.StoreForTest(), b.StoreForTest()}
		for stop := time.Now().Add(30 * time.Second); time.Now().Before(stop); {
			now := time.Now()
			s.mu.Lock()
			for i, st := range stores {
				if _, ok := st.Cooling(provider, now); ok && s.first[i].IsZero() {
					s.first[i] = now
				}
			}
			both := !s.first[0].IsZero() && !s.first[1].IsZero()
			s.mu.Unlock()
			if both {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return s
}

// lag waits for the poller to end and returns how long after the first
// mirror the second showed the cooldown.
func (s *coolingSeen) lag(t *testing.T) time.Duration {
	t.Helper()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first[0].IsZero() || s.first[1].IsZero() {
		t.Fatalf("cooldown not shown by both mirrors: %v", s.first)
	}
	d := s.first[1].Sub(s.first[0])
	return max(d, -d)
}
