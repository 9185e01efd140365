package topology_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

func repairTopology() topology.Streams {
	return topology.Streams{
		Chains: []string{"default", "other"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
	}
}

// warnings counts the warnings logged, by message.
type warnings struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[r.Message]++
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for msg, c := range w.n {
		if strings.HasPrefix(msg, prefix) {
			n += c
		}
	}
	return n
}

// TestRepairerRecreatesWhatIsMissing: fifty workers that find the results
// stream and a consumer gone at once make one repair, logged once, after
// which the topology is whole again and configured as at start.
func TestRepairerRecreatesWhatIsMissing(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx := context.Background()
	topo := repairTopology()
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, wire.ResultsStream); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, wire.RequestsStream, wire.ConsumerName("other")); err != nil {
		t.Fatal(err)
	}
	logs := &warnings{n: map[string]int{}}
	r := topology.NewRepairer(js, topo, slog.New(logs))
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Ensure(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := logs.count("topology incomplete"); n != 1 {
		t.Fatalf("repair logged %d times, want once", n)
	}
	checkTopology(t, js, topo)
	var nilRepairer *topology.Repairer
	if err := nilRepairer.Ensure(ctx); err != nil {
		t.Fatalf("a nil Repairer: %v", err)
	}
}

// TestRepairerPutsBackAChainsSubject: another processor's update of the
// requests stream, made at the same moment as this one's, can leave out a
// chain of this one's; its consumer and pulls carry on, and only publishes
// fail. The check puts the subject back.
func TestRepairerPutsBackAChainsSubject(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx := context.Background()
	topo := repairTopology()
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	cfg := streamConfig(t, js, wire.RequestsStream)
	cfg.Subjects = []string{wire.RequestSubject("default")}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	logs := &warnings{n: map[string]int{}}
	if err := topology.NewRepairer(js, topo, slog.New(logs)).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("topology incomplete"); n != 1 {
		t.Fatalf("repair logged %d times, want once", n)
	}
	checkTopology(t, js, topo)
}
