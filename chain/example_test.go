package chain_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// outageState is the smallest useful chain.State: it counts consecutive
// counted failures per provider and opens a cooldown at the threshold. In
// production, package kvstate implements State on a JetStream KV bucket that
// every processor shares.
type outageState struct {
	mu       sync.Mutex
	failures map[string]int
	until    map[string]time.Time
}

func (s *outageState) Admit(_ context.Context, provider string, now time.Time, _ time.Duration) chain.Admission {
	if until, cooling := s.Cooling(provider, now); cooling {
		return chain.Admission{Until: until}
	}
	return chain.Admission{Allowed: true}
}

func (s *outageState) ReleaseProbe(context.Context, string, uint64) error { return nil }

func (s *outageState) Cooling(provider string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until[provider], now.Before(s.until[provider])
}

func (s *outageState) RecordFailure(_ context.Context, provider string, f chain.Failure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[provider]++
	if f.CooldownFor > 0 {
		s.until[provider] = f.At.Add(f.CooldownFor)
	} else if n := f.Policy.FailureThreshold; n > 0 && s.failures[provider] >= n {
		s.until[provider] = f.At.Add(f.Policy.Cooldown)
	}
	return nil
}

func (s *outageState) RecordSuccess(_ context.Context, provider string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[provider] = 0
	return nil
}

// A two-step chain whose primary is down: the primary is retried once, trips
// its cooldown, and the backup answers. The next request skips the primary
// without calling it.
func Example() {
	down := providertest.New(providertest.OpenAI, providertest.Status(http.StatusServiceUnavailable))
	defer down.Close()
	up := providertest.New(providertest.OpenAI, providertest.OK())
	defer up.Close()

	c := &chain.Chain{
		Name:  "default",
		State: &outageState{failures: map[string]int{}, until: map[string]time.Time{}},
		Steps: []chain.Step{
			{
				Provider: chain.NewOpenAI("primary", down.URL, "gpt-4o", "primary-key", nil),
				Policy: chain.Policy{
					Timeout:     10 * time.Second,
					MaxRetries:  1,
					BackoffBase: 10 * time.Millisecond,
					BackoffMax:  100 * time.Millisecond,
					Cooldown:    chain.CooldownPolicy{FailureThreshold: 2, Cooldown: time.Minute},
				},
			},
			{
				Provider: chain.NewOpenAI("backup", up.URL, "gpt-4o-mini", "backup-key", nil),
				Policy:   chain.Policy{Timeout: 10 * time.Second},
			},
		},
	}
	req := chain.Request{ID: "req-1", Messages: []chain.Message{{Role: "user", Content: "hello"}}}

	for range 2 {
		res, err := c.Run(context.Background(), &req)
		if err != nil {
			fmt.Println("failed:", err)
			return
		}
		fmt.Printf("%s answered at position %d (degraded %v): %s\n", res.Provider, res.Position, res.Degraded, res.Content)
		for _, a := range res.Attempts {
			if a.Class == chain.ClassNone {
				fmt.Printf("  %s %s\n", a.Provider, a.Outcome)
			} else {
				fmt.Printf("  %s %s %s\n", a.Provider, a.Outcome, a.Class)
			}
		}
	}
	fmt.Println("calls to primary:", down.Requests())
	// Output:
	// backup answered at position 1 (degraded true): gpt-4o-mini answers: hello
	//   primary failed server
	//   primary failed server
	//   backup ok
	// backup answered at position 1 (degraded true): gpt-4o-mini answers: hello
	//   primary skipped cooldown
	//   backup ok
	// calls to primary: 2
}
