package demo_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/cmd/processor/internal/demo"
)

// complete sends one chat completion to a demo provider and returns the
// status and the answer's content.
func complete(t *testing.T, baseURL, prompt string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "demo", "messages": []map[string]string{{"role": "user", "content": prompt}}})
	resp, err := http.Post(baseURL+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("answer: %v %+v", err, out)
	}
	return resp.StatusCode, out.Choices[0].Message.Content
}

// TestDemoProviders: the primary is down during its first minute, the
// backup answers, and both answer a prompt that asks for JSON with the
// object of examples/answer.schema.json.
func TestDemoProviders(t *testing.T) {
	d, err := demo.Start(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if names := d.File.Chains["default"]; len(names) != 3 || names[0] != "primary" || names[1] != "backup" || names[2] != "template" {
		t.Fatalf("demo chain %v", names)
	}
	if c := d.File.Cache("cached"); !slices.Equal(d.File.Chains["cached"], d.File.Chains["default"]) || c.TTL != time.Minute || c.StaleTTL != 10*time.Minute {
		t.Errorf("demo chain cached: %v with %+v; want default's providers, a 1m cache and 10m stale", d.File.Chains["cached"], c)
	}
	if code, _ := complete(t, d.Primary.URL, "hello"); code != http.StatusServiceUnavailable {
		t.Errorf("primary in its first minute: %d, want 503", code)
	}
	if _, got := complete(t, d.Backup.URL, "hello"); got != "demo answers: hello" {
		t.Errorf("backup: %q", got)
	}
	if _, got := complete(t, d.Backup.URL, "answer in JSON"); got != `{"answer":"demo answers: answer in JSON"}` {
		t.Errorf("backup asked for JSON: %q", got)
	}

	recovered, err := demo.Start(time.Now().Add(-demo.Outage))
	if err != nil {
		t.Fatal(err)
	}
	defer recovered.Close()
	if _, got := complete(t, recovered.Primary.URL, "answer in json please"); got != `{"answer":"demo answers: answer in json please"}` {
		t.Errorf("primary after its outage, asked for JSON: %q", got)
	}
}

// TestDemoProvidersKeepNoRequests: a demo runs as long as its user likes,
// so its providers count the requests they answer but keep none of them.
func TestDemoProvidersKeepNoRequests(t *testing.T) {
	d, err := demo.Start(time.Now().Add(-demo.Outage))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for range 3 {
		complete(t, d.Primary.URL, "hello")
		complete(t, d.Backup.URL, "hello")
	}
	for name, s := range map[string]*providertest.Server{"primary": d.Primary, "backup": d.Backup} {
		if n, kept := s.Requests(), len(s.Received()); n != 3 || kept != 0 {
			t.Errorf("%s: answered %d requests and kept %d, want 3 and 0", name, n, kept)
		}
	}
}
