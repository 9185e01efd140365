package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/detourhq/detour/cmd/processor/internal/metrics"
	"github.com/detourhq/detour/cmd/processor/internal/statuspage"
	"github.com/detourhq/detour/kvstate"
)

// TestStatusJSONSurvivesATripPastYear9999: a hand-written health value
// whose trip would end past year 9999, which no writer makes, is ignored:
// /status.json stays whole, with every provider of the chain file.
func TestStatusJSONSurvivesATripPastYear9999(t *testing.T) {
	h := newHarness(t)
	file := parseChainFile(t, outageChain("http://127.0.0.1:1", "http://127.0.0.1:1", 3))
	p := h.assemble(file, testSettings(), true, withMetrics(metrics.New()))
	web := httptestServer(t, p.Processor) + "status.json"
	kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), kvstate.HealthKey("h1"),
		[]byte(`{"consecutive_failures":3,"trips":1,"last_trip":"9999-12-31T23:00:00Z","last_trip_s":7200}`)); err != nil {
		t.Fatal(err)
	}
	// The watch delivers in order: once it holds a key written after h1's,
	// it has judged h1's.
	if _, err := kv.Put(context.Background(), kvstate.HealthKey("after"), []byte(`{"consecutive_failures":1,"trips":0}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the mirror holds the key after h1's", func() bool {
		_, ok := p.StoreForTest().Health("after")
		return ok
	})
	if h, ok := p.StoreForTest().Health("h1"); ok {
		t.Errorf("the mirror took h1's value %+v", h)
	}
	resp, err := http.Get(web)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var snap statuspage.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatalf("status.json (HTTP %d, %d bytes): %v", resp.StatusCode, len(body), err)
	}
	rows := map[string]statuspage.Provider{}
	for _, r := range snap.Providers {
		rows[r.Provider] = r
	}
	for _, name := range []string{"backup", "dead"} {
		if _, ok := rows[name]; !ok {
			t.Errorf("no row for %s in %s", name, body)
		}
	}
	if r, ok := rows["h1"]; ok && r.State != kvstate.StateClosed {
		t.Errorf("h1: %s, want its value ignored", r.State)
	}
}

// TestAHandWrittenTripIsBelievedAsWritten: the bucket is the fleet's own,
// so a trip written there by hand holds its provider for as long as it
// says, even past the provider's max_cooldown (1h by default).
func TestAHandWrittenTripIsBelievedAsWritten(t *testing.T) {
	h := newHarness(t)
	file := parseChainFile(t, outageChain("http://127.0.0.1:1", "http://127.0.0.1:1", 3))
	p := h.assemble(file, testSettings(), true, withMetrics(metrics.New()))
	kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := kv.Put(context.Background(), kvstate.HealthKey("dead"),
		[]byte(`{"consecutive_failures":3,"trips":1,"last_trip":"`+now.Format(time.RFC3339)+`","last_trip_s":7200}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the mirror holds the trip", func() bool {
		_, ok := p.StoreForTest().Health("dead")
		return ok
	})
	until, cooling := p.StoreForTest().Cooling("dead", time.Now())
	if want := now.Add(2 * time.Hour); !cooling || until.Before(want.Add(-time.Second)) || until.After(want.Add(time.Second)) {
		t.Fatalf("dead cooling %v until %s; want until %s, two hours from the trip", cooling, until, want)
	}
}
