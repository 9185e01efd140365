package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// TestRejectedRequestsArePoisonNotOutages is acceptance 2 of the
// failure-semantics issue: 1,000 requests that all draw 400 from the first
// provider open no cooldown, and the ones every provider rejects are
// dead-lettered as poison after one pass each, without a template answer.
func TestRejectedRequestsArePoisonNotOutages(t *testing.T) {
	picky := providertest.New(providertest.OpenAI, providertest.Status(400))
	defer picky.Close()
	backup := providertest.New(providertest.OpenAI, func(n int, req providertest.Request) providertest.Reply {
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "reject") {
			return providertest.Status(422)(n, req)
		}
		return providertest.OK()(n, req)
	})
	defer backup.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.Workers = 32
	p := h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: picky, type: openai, base_url: %s, model: m1, failure_threshold: 1, max_retries: 3}
  - {name: backup, type: openai, base_url: %s, model: m2, failure_threshold: 1, max_retries: 3}
  - {name: template, type: rules, default_reply: "template answer"}
chains:
  default: [picky, backup, template]
`, picky.URL, backup.URL)), settings)

	const total, rejected = 1000, 100
	for i := range total {
		prompt := "hello"
		if i%(total/rejected) == 0 {
			prompt = "please reject me"
		}
		h.publish("default", request(fmt.Sprintf("r%d", i), prompt))
	}
	ctx := context.Background()
	results, err := h.js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "a result for every request", func() bool {
		info, err := results.Info(ctx)
		return err == nil && info.State.Msgs == total
	})
	eventually(t, 10*time.Second, "the poison dead letters", func() bool { return len(h.deadLetters()) == rejected })

	for _, dl := range h.deadLetters() {
		if r := dl.Header.Get(deadletter.HeaderReason); r != string(deadletter.ReasonPoison) {
			t.Fatalf("dead letter reason %q, want poison", r)
		}
		if d := dl.Header.Get(deadletter.HeaderDeliveries); d != "1" {
			t.Fatalf("poison dead-lettered after %s deliveries, want 1", d)
		}
		if !strings.Contains(dl.Header.Get(deadletter.HeaderAttempts), `"class":"request"`) {
			t.Fatalf("dead letter attempts %q do not show the rejections", dl.Header.Get(deadletter.HeaderAttempts))
		}
	}
	var ok, failed int
	cons, err := results.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(total, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		res, err := wire.DecodeResult(m.Data(), m.Headers())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Status == chain.StatusOK && res.Provider == "backup":
			ok++
		case res.Status == chain.StatusFailed && res.Provider == "":
			failed++
		default:
			t.Fatalf("unexpected result %+v", res)
		}
	}
	if ok != total-rejected || failed != rejected {
		t.Fatalf("%d answered by backup and %d failed, want %d and %d", ok, failed, total-rejected, rejected)
	}
	if got := picky.Requests(); got != total {
		t.Fatalf("picky received %d requests, want %d: one call each, never retried or skipped", got, total)
	}
	for _, name := range []string{"picky", "backup"} {
		if _, cooled := mirroredCooldown(p.StoreForTest(), name); cooled {
			t.Fatalf("%s was put in cooldown by request errors", name)
		}
	}
}

// judgedScenario is a chain [picky, backup, template] whose picky provider
// rejects every request (400) and whose backup answers 503 once, which
// trips it for two seconds (failure_threshold 1), and then as then says.
type judgedScenario struct {
	h      *harness
	picky  *providertest.Server
	backup *providertest.Server
}

func newJudgedScenario(t *testing.T, then providertest.Script) *judgedScenario {
	t.Helper()
	picky := providertest.New(providertest.OpenAI, providertest.Status(400))
	t.Cleanup(picky.Close)
	backup := providertest.New(providertest.OpenAI, providertest.Sequence(providertest.Status(503), then))
	t.Cleanup(backup.Close)
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: picky, type: openai, base_url: %s, model: m1, max_retries: 0}
  - {name: backup, type: openai, base_url: %s, model: m2, max_retries: 0, failure_threshold: 1, cooldown: 2s}
  - {name: template, type: rules, default_reply: "template answer"}
chains:
  default: [picky, backup, template]
`, picky.URL, backup.URL)), testSettings())
	// An outage is answered by the template, and leaves backup cooling.
	h.publish("default", request("outage", "hello"))
	if res, _ := h.waitResult("outage", 10*time.Second); res.Provider != "template" || res.Attempts[1].Class != chain.ClassServer {
		t.Fatalf("outage: %+v, want backup's 503 and the template's answer", res)
	}
	return &judgedScenario{h: h, picky: picky, backup: backup}
}

// TestARequestRejectedWhileTheOthersCoolWaitsForThem: with backup cooling,
// picky's 400 does not make the request poison, and the template does not
// answer it: it waits for backup's reopen, and backup's answer is its
// result.
func TestARequestRejectedWhileTheOthersCoolWaitsForThem(t *testing.T) {
	s := newJudgedScenario(t, providertest.OK())
	s.h.publish("default", request("judged", "hello"))
	res, _ := s.h.waitResult("judged", 15*time.Second)
	if res.Status != chain.StatusOK || res.Provider != "backup" || res.Position != 1 || !res.Degraded {
		t.Fatalf("result %+v, want ok from backup", res)
	}
	if res.Deliveries < 2 {
		t.Fatalf("answered at delivery %d, want a later one, after backup's reopen", res.Deliveries)
	}
	if dls := s.h.deadLetters(); len(dls) != 0 {
		t.Fatalf("%d dead letters (first: %s), want none", len(dls), dls[0].Header.Get(deadletter.HeaderReason))
	}
	if got := s.backup.Requests(); got != 2 {
		t.Fatalf("backup received %d requests, want 2: the outage's and this request's", got)
	}
}

// TestARequestEveryProviderRejectsIsPoisonOnceAllHaveJudged: when backup,
// reopened, rejects the request too, it is poison then, with both
// rejections in its dead letter, and the template never answers it.
func TestARequestEveryProviderRejectsIsPoisonOnceAllHaveJudged(t *testing.T) {
	s := newJudgedScenario(t, providertest.Status(400))
	s.h.publish("default", request("judged", "hello"))
	res, _ := s.h.waitResult("judged", 15*time.Second)
	if res.Status != chain.StatusFailed || !strings.HasPrefix(res.Error, string(deadletter.ReasonPoison)) || res.Content != "" {
		t.Fatalf("result %+v, want failed as poison, no content", res)
	}
	var dls []*jetstream.RawStreamMsg
	eventually(t, 10*time.Second, "the poison dead letter", func() bool { dls = s.h.deadLetters(); return len(dls) == 1 })
	dl := dls[0]
	if r := dl.Header.Get(deadletter.HeaderReason); r != string(deadletter.ReasonPoison) {
		t.Fatalf("dead letter reason %q, want poison", r)
	}
	if d := dl.Header.Get(deadletter.HeaderDeliveries); d == "1" {
		t.Fatal("poison at the first delivery, while backup was cooling and had not judged it")
	}
	attempts := dl.Header.Get(deadletter.HeaderAttempts)
	if strings.Count(attempts, `"class":"request"`) != 2 || !strings.Contains(attempts, `"provider":"backup"`) {
		t.Fatalf("dead letter attempts %s, want both providers' rejections", attempts)
	}
}
