// Package deploy_test checks what deploy/ ships: the NATS cluster
// configuration is one valid three-node JetStream cluster. That the
// dashboard and the rules query only metrics detour exports is checked
// beside the metrics (cmd/processor/internal/metrics), and promtool checks
// the rules' syntax and alerts in .ci/run.
package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSClusterConfig reads each node's configuration as nats-server
// does: one JetStream cluster "detour" of three nodes, each routing to all.
func TestNATSClusterConfig(t *testing.T) {
	names := map[string]bool{}
	for i := 1; i <= 3; i++ {
		path := filepath.Join("nats-cluster", "nats-"+string(rune('0'+i))+".conf")
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !opts.JetStream || opts.Cluster.Name != "detour" || len(opts.Routes) != 3 {
			t.Errorf("%s: jetstream %t, cluster %q, %d routes; want JetStream in cluster detour with 3 routes",
				path, opts.JetStream, opts.Cluster.Name, len(opts.Routes))
		}
		names[opts.ServerName] = true
	}
	if len(names) != 3 {
		t.Errorf("server names %v, want three different ones", names)
	}
	compose, err := os.ReadFile(filepath.Join("nats-cluster", "README.md"))
	if err != nil || !strings.Contains(string(compose), "DETOUR_REPLICAS=3") {
		t.Errorf("nats-cluster/README.md does not set DETOUR_REPLICAS=3: %v", err)
	}
}
