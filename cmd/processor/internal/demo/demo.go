package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/wire"
)

// Outage is how long the demo's primary is down after start.
const Outage = time.Minute

// Demo is the running fake providers and the chain file that uses them.
type Demo struct {
	Primary, Backup *providertest.Server
	File            *config.File
}

// Start starts the fake providers; the primary answers 503 until Outage has
// passed since now.
func Start(now time.Time) (*Demo, error) {
	primary := providertest.New(providertest.OpenAI, providertest.Until(now.Add(Outage), providertest.Status(503), answer()))
	backup := providertest.New(providertest.OpenAI, providertest.Slow(150*time.Millisecond, answer()))
	// A demo runs as long as its user likes: its providers keep no request.
	primary.KeepReceived(0)
	backup.KeepReceived(0)
	file, err := config.Parse([]byte(chainFile(primary.URL, backup.URL)), func(string) (string, bool) { return "", false })
	if err != nil {
		primary.Close()
		backup.Close()
		return nil, fmt.Errorf("demo: chain file: %w", err)
	}
	return &Demo{Primary: primary, Backup: backup, File: file}, nil
}

// answer answers as providertest.OK does ("<model> answers: <prompt>"),
// but as a JSON object {"answer": "<model> answers: <prompt>"} when the
// last user message mentions JSON, so that a request with a
// response_schema asking for that object is answered
// (`publisher -schema examples/answer.schema.json "answer in JSON"`).
func answer() providertest.Script {
	ok := providertest.OK()
	return func(n int, req providertest.Request) providertest.Reply {
		r := ok(n, req)
		if asksForJSON(req.Messages) {
			b, _ := json.Marshal(map[string]string{"answer": r.Content})
			r.Content = string(b)
		}
		return r
	}
}

// asksForJSON reports whether the last user message mentions JSON.
func asksForJSON(msgs []providertest.Message) bool {
	m, _, ok := lo.FindLastIndexOf(msgs, func(m providertest.Message) bool { return m.Role == "user" })
	return ok && strings.Contains(strings.ToLower(m.Content), "json")
}

// chainFile is the demo's chain file: short cooldowns so the outage is seen
// to open, expire and close within a minute or two.
func chainFile(primaryURL, backupURL string) string {
	return fmt.Sprintf(`
providers:
  - name: primary
    type: openai
    base_url: %s
    model: demo-large
    timeout: 5s
    max_retries: 1
    backoff_base: 100ms
    backoff_max: 1s
    failure_threshold: 3
    cooldown: 15s
    max_cooldown: 30s
  - name: backup
    type: openai
    base_url: %s
    model: demo-small
    timeout: 5s
  - name: template
    type: rules
    rules:
      - match: ["weather", "天气"]
        reply: "Weather is unavailable right now; please try again later."
    default_reply: "The AI service is having trouble; please try again shortly."
chains:
  default: [primary, backup, template]
  cached: {providers: [primary, backup, template], cache_ttl: 1m, stale_ttl: 10m}
`, primaryURL, backupURL)
}

// Close stops the fake providers.
func (d *Demo) Close() {
	d.Primary.Close()
	d.Backup.Close()
}

// Trickle publishes one request every interval to the default chain and logs
// who answered it, until ctx ends.
func Trickle(ctx context.Context, nc *nats.Conn, every time.Duration, logger *slog.Logger) error {
	inbox := nc.NewInbox()
	sub, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			logger.Warn("demo: unreadable result", "err", err)
			return
		}
		logger.Info("demo: answered", "id", res.ID, "provider", res.Provider, "model", res.Model,
			"degraded", res.Degraded, "attempts", len(res.Attempts), "latency_ms", res.LatencyMs)
	})
	if err != nil {
		return fmt.Errorf("demo: subscribing to results: %w", err)
	}
	defer sub.Unsubscribe()
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		id := fmt.Sprintf("demo-%d-%d", time.Now().Unix(), n)
		body, _ := json.Marshal(wire.Request{
			ID:       id,
			Messages: []chain.Message{{Role: "user", Content: fmt.Sprintf("demo question %d", n)}},
			ReplyTo:  inbox + "." + id,
		})
		if err := nc.Publish(wire.RequestSubject("default"), body); err != nil {
			logger.Warn("demo: publishing", "err", err)
		}
	}
}
