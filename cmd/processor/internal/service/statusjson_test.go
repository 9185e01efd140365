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
// whose trip would end past year 9999 leaves /status.json whole: every
// provider has its row, and the bad one reads as open for the trip's
// length from its write.
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
	eventually(t, 5*time.Second, "the mirror holds h1", func() bool {
		_, ok := p.StoreForTest().Health("h1")
		return ok
	})
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
	for _, name := range []string{"backup", "dead", "h1"} {
		if _, ok := rows[name]; !ok {
			t.Errorf("no row for %s in %s", name, body)
		}
	}
	if r := rows["h1"]; r.State != kvstate.StateOpen || r.RemainingS <= 0 || r.RemainingS > 7200+60 {
		t.Errorf("h1: %s with %.0fs left, want open for at most the trip's 7200s", r.State, r.RemainingS)
	}
}

// TestAHandWrittenTripLastsNoLongerThanTheChainFileAllows: a processor
// believes a trip of one of its providers for no longer than that
// provider's longest cooldown in its chain file (max_cooldown, 1h by
// default), however long the value in the bucket says.
func TestAHandWrittenTripLastsNoLongerThanTheChainFileAllows(t *testing.T) {
	h := newHarness(t)
	file := parseChainFile(t, outageChain("http://127.0.0.1:1", "http://127.0.0.1:1", 3))
	p := h.assemble(file, testSettings(), true, withMetrics(metrics.New()))
	kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := kv.Put(context.Background(), kvstate.HealthKey("dead"),
		[]byte(`{"consecutive_failures":3,"trips":1,"last_trip":"`+now.Format(time.RFC3339)+`","last_trip_s":315360000}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the mirror holds the trip", func() bool {
		_, ok := p.StoreForTest().Health("dead")
		return ok
	})
	until, cooling := p.StoreForTest().Cooling("dead", time.Now())
	if !cooling || until.After(now.Add(time.Hour+time.Minute)) {
		t.Fatalf("dead cooling %v until %s; want at most an hour from the trip", cooling, until)
	}
}
