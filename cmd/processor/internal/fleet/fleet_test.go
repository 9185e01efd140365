package fleet_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/fleet"
	"github.com/detourhq/detour/config"
)

func provider(baseURL string) config.Provider {
	return config.Provider{
		Name: "primary", Type: config.TypeOpenAI, BaseURL: baseURL, Model: "gpt-4o",
		APIKeyEnv: "OPENAI_API_KEY", APIKey: "sk-SECRET", Timeout: 30 * time.Second, FailureThreshold: 3,
		Cooldown: 10 * time.Minute, MaxCooldown: time.Hour,
	}
}

// TestDefineKeepsNoSecret: the key, its variable and whatever a URL could
// carry in user, query or fragment stay out of the definition, and so out
// of the fingerprint.
func TestDefineKeepsNoSecret(t *testing.T) {
	d := fleet.Define(provider("https://user:pw@api.example.com/v1?key=sk-QUERY#frag"))
	all := d.String() + d.Fingerprint
	for _, secret := range []string{"sk-SECRET", "OPENAI_API_KEY", "pw", "sk-QUERY", "frag", "user"} {
		if strings.Contains(all, secret) {
			t.Errorf("definition %q holds %q", all, secret)
		}
	}
	if d.BaseURL != "https://api.example.com/v1" {
		t.Errorf("base URL %q", d.BaseURL)
	}
	other := provider("https://api.example.com/v1")
	other.APIKey = "sk-OTHER"
	if fleet.Define(other).Fingerprint != d.Fingerprint {
		t.Error("another key changed the fingerprint")
	}
}

// TestConflicts finds the names defined two ways, and only those; a
// change of model or policy counts as much as a change of base URL.
func TestConflicts(t *testing.T) {
	a := provider("https://a.example.com/v1")
	b := provider("https://b.example.com/v1")
	slow := a
	slow.Timeout = time.Minute
	in := func(id string, ps ...config.Provider) fleet.Instance {
		m := map[string]fleet.Definition{}
		for _, p := range ps {
			m[p.Name] = fleet.Define(p)
		}
		return fleet.Instance{Processor: id, Providers: m}
	}
	if c := fleet.Conflicts([]fleet.Instance{in("p1", a), in("p2", a)}); len(c) != 0 {
		t.Errorf("alike: %v", c)
	}
	c := fleet.Conflicts([]fleet.Instance{in("p1", a), in("p2", b), in("p3", a)})
	if len(c) != 1 || c[0].Provider != "primary" || len(c[0].Definitions) != 2 {
		t.Fatalf("base URL differs: %+v", c)
	}
	procs := map[string]string{}
	for _, h := range c[0].Definitions {
		procs[h.BaseURL] = strings.Join(h.Processors, ",")
	}
	if procs["https://a.example.com/v1"] != "p1,p3" || procs["https://b.example.com/v1"] != "p2" {
		t.Errorf("processors by definition: %v", procs)
	}
	if got := fleet.Involving(c, "p9"); len(got) != 0 {
		t.Errorf("Involving a processor in none: %v", got)
	}
	if c := fleet.Conflicts([]fleet.Instance{in("p1", a), in("p2", slow)}); len(c) != 1 {
		t.Errorf("policy differs: %v", c)
	}
	if !strings.Contains(c[0].String(), "a.example.com") || !strings.Contains(c[0].String(), "b.example.com") {
		t.Errorf("String names one side only: %s", c[0])
	}
}

// TestRecordRoundTrip: what Record writes is what Instances reads back, and
// it never holds the API key.
func TestRecordRoundTrip(t *testing.T) {
	f := &config.File{Providers: []config.Provider{provider("https://a.example.com/v1")}}
	record := fleet.Record("p1", f)
	got := fleet.Instances([]json.RawMessage{record, json.RawMessage(`{"providers":{}}`), json.RawMessage(`[1]`)})
	if len(got) != 1 || got[0].Processor != "p1" || got[0].Providers["primary"].BaseURL != "https://a.example.com/v1" {
		t.Errorf("read back %+v from %s; want p1's alone (a record without a processor, or not an object, is left out)", got, record)
	}
	if strings.Contains(string(record), "sk-SECRET") {
		t.Errorf("the record reveals the key: %s", record)
	}
}
