package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/chains"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/kvstate/kvstatetest"
)

// TestFailureClassTable is acceptance 1 of the failure-semantics issue: each
// status, a refused connection and an attempt timeout get the class, the
// retry decision and the cooldown decision of docs/failures.md, for both
// adapters, with the real KV state. With max_retries 1 and
// failure_threshold 2, a retried class makes two calls and trips the
// provider; auth makes one call and trips it at once; request makes one call
// and leaves it alone.
func TestFailureClassTable(t *testing.T) {
	type want struct {
		class  chain.Class
		calls  int
		cooled bool
	}
	retried := func(c chain.Class) want { return want{c, 2, true} }
	cases := []struct {
		name   string
		script providertest.Script
		closed bool // the server is closed before the call: connection refused
		want   want
	}{
		{"400", providertest.Status(400), false, want{chain.ClassRequest, 1, false}},
		{"401", providertest.Status(401), false, want{chain.ClassAuth, 1, true}},
		// A 402, 403 or 404 whose body names neither the request nor the
		// credential is counted like a server failure.
		{"402", providertest.Status(402), false, retried(chain.ClassServer)},
		{"403", providertest.Status(403), false, retried(chain.ClassServer)},
		{"404", providertest.Status(404), false, retried(chain.ClassServer)},
		{"408", providertest.Status(408), false, retried(chain.ClassTimeout)},
		{"413", providertest.Status(413), false, want{chain.ClassRequest, 1, false}},
		{"422", providertest.Status(422), false, want{chain.ClassRequest, 1, false}},
		{"429", providertest.Status(429), false, retried(chain.ClassRateLimit)},
		{"500", providertest.Status(500), false, retried(chain.ClassServer)},
		{"502", providertest.Status(502), false, retried(chain.ClassServer)},
		{"503", providertest.Status(503), false, retried(chain.ClassServer)},
		{"504", providertest.Status(504), false, retried(chain.ClassServer)},
		{"529", providertest.Status(529), false, retried(chain.ClassServer)},
		{"refused", providertest.OK(), true, retried(chain.ClassNetwork)},
		{"attempt timeout", providertest.Hang(), false, retried(chain.ClassTimeout)},
	}
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	kv, err := kvstate.OpenBucket(context.Background(), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for i, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", flavor, tc.name), func(t *testing.T) {
				fake := providertest.New(flavor, tc.script)
				defer fake.Close()
				if tc.closed {
					fake.Close()
				}
				name := fmt.Sprintf("p%d-%s", i, flavor)
				file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: %s, type: %s, base_url: %s, model: m, timeout: 300ms, max_retries: 1,
     backoff_base: 1ms, backoff_max: 2ms, failure_threshold: 2, auth_cooldown: 60s}
chains:
  default: [%s]
`, name, flavor, fake.URL, name))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				store := kvstate.New(js, kv, kvstate.Options{ID: "table"})
				kvstatetest.Follow(t, ctx, store)
				var logged bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelError}))
				built, err := chains.Build(file, store, nil, logger)
				if err != nil {
					t.Fatal(err)
				}
				res, err := built["default"].Run(ctx, &chain.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}})
				if err == nil {
					t.Fatalf("run succeeded: %+v", res)
				}
				calls := len(res.Attempts)
				if !tc.closed {
					calls = fake.Requests()
				}
				last := res.Attempts[len(res.Attempts)-1]
				_, cooled := mirroredCooldown(store, name)
				got := want{last.Class, calls, cooled}
				if got != tc.want {
					t.Fatalf("got class=%s calls=%d cooled=%v, want class=%s calls=%d cooled=%v",
						got.class, got.calls, got.cooled, tc.want.class, tc.want.calls, tc.want.cooled)
				}
				errorLogged := strings.Contains(logged.String(), "level=ERROR")
				if tc.want.class == chain.ClassAuth {
					// auth_cooldown (60s) opens at once, and the operator is
					// told at error level: a key or model is wrong.
					if c, _ := mirroredCooldown(store, name); c.DurationS != 60 {
						t.Fatalf("auth cooldown of %d s, want auth_cooldown 60 s", c.DurationS)
					}
					if !errorLogged {
						t.Fatalf("auth failure not logged at error level; log: %q", logged.String())
					}
				} else if errorLogged {
					t.Fatalf("%s logged at error level: %q", tc.want.class, logged.String())
				}
				for _, a := range res.Attempts {
					if a.Class != tc.want.class {
						t.Fatalf("attempt %+v has another class than %s", a, tc.want.class)
					}
				}
			})
		}
	}
}
