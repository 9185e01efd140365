package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"
)

// clusterReadyTimeout bounds how long StartCluster and StreamLeader wait for
// the cluster to elect; an election after a node loss takes seconds.
const clusterReadyTimeout = 20 * time.Second

// StartCluster runs n JetStream servers routed into one cluster (ServerName
// "n0", "n1", …, each with its own store) and returns once the meta group has
// a leader, every server has caught up with it and a client's JetStream
// request is answered. Cleanup shuts all of them down.
func StartCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d servers", n)
	}
	// Every server lists every route, itself included (its own is ignored):
	// JetStream sizes its meta group from the configured routes, so the
	// route ports must be known before any server starts.
	ports := freePorts(t, n)
	routes := lo.Map(ports, func(p, _ int) string { return fmt.Sprintf("nats-route://127.0.0.1:%d", p) })
	servers := make([]*server.Server, n)
	for i := range n {
		servers[i] = StartWith(t, &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Cluster:    server.ClusterOpts{Name: "detour-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		})
	}
	if err := poll(func() error { return clusterReady(servers) }); err != nil {
		t.Fatalf("natstest: cluster not ready after %s: %v", clusterReadyTimeout, err)
	}
	return servers
}

// freePorts reserves n distinct loopback ports and releases them for the
// servers to bind. Another process could take one in between; on a test
// machine that is rare enough to accept.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		fatalIf(t, "reserving a port")(err)
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// poll calls try every 50 ms until it succeeds or clusterReadyTimeout has
// passed, and returns its last error.
func poll(try func() error) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		err := try()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dial connects to the running servers; the caller closes the connection.
func dial(servers []*server.Server) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(ClusterURLs(servers))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// clusterReady checks for a meta leader that sees every server as a peer,
// every server current with it, and a JetStream API answer through a client.
func clusterReady(servers []*server.Server) error {
	leader := lo.FindOrElse(servers, nil, (*server.Server).JetStreamIsLeader)
	if leader == nil {
		return errors.New("no JetStream meta leader")
	}
	if peers := leader.JetStreamClusterPeers(); len(peers) != len(servers) {
		return fmt.Errorf("meta leader %s sees %d of %d peers", leader.Name(), len(peers), len(servers))
	}
	if s, behind := lo.Find(servers, func(s *server.Server) bool { return !s.JetStreamIsCurrent() }); behind {
		return fmt.Errorf("server %s not current with the meta leader", s.Name())
	}
	nc, js, err := dial(servers)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("account info: %w", err)
	}
	return nil
}

// ClusterURLs is the comma-separated client URL list of the servers that are
// running, the form nats.Connect takes to fail over between them.
func ClusterURLs(servers []*server.Server) string {
	running := lo.Filter(servers, func(s *server.Server, _ int) bool { return s.Running() })
	return strings.Join(lo.Map(running, func(s *server.Server, _ int) string { return s.ClientURL() }), ",")
}

// ServerNamed returns the server whose ServerName is name, or nil.
func ServerNamed(servers []*server.Server, name string) *server.Server {
	return lo.FindOrElse(servers, nil, func(s *server.Server) bool { return s.Name() == name })
}

// StreamLeader returns the running server that leads stream (in the default
// account), as the stream's info names it, waiting for an election if there
// is none at the moment.
func StreamLeader(t testing.TB, servers []*server.Server, stream string) *server.Server {
	t.Helper()
	return leaderOf(t, servers, "stream "+stream, func(ctx context.Context, js jetstream.JetStream) (*jetstream.ClusterInfo, error) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		return s.CachedInfo().Cluster, nil
	})
}

// ConsumerLeader is StreamLeader for a durable consumer of stream.
func ConsumerLeader(t testing.TB, servers []*server.Server, stream, consumer string) *server.Server {
	t.Helper()
	return leaderOf(t, servers, "consumer "+stream+" > "+consumer, func(ctx context.Context, js jetstream.JetStream) (*jetstream.ClusterInfo, error) {
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return nil, err
		}
		return c.CachedInfo().Cluster, nil
	})
}

// leaderOf polls cluster until the leader it names is a running server of
// servers.
func leaderOf(t testing.TB, servers []*server.Server, what string, cluster func(context.Context, jetstream.JetStream) (*jetstream.ClusterInfo, error)) *server.Server {
	t.Helper()
	nc, js, err := dial(servers)
	fatalIf(t, "connect")(err)
	defer nc.Close()
	var leader *server.Server
	err = poll(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ci, err := cluster(ctx, js)
		switch {
		case err != nil:
			return err
		case ci == nil || ci.Leader == "":
			return errors.New("no leader")
		}
		if leader = ServerNamed(servers, ci.Leader); leader == nil || !leader.Running() {
			return fmt.Errorf("leader %q is not a running server of the cluster", ci.Leader)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("natstest: leader of %s: %v", what, err)
	}
	return leader
}

// Stop shuts s down and waits until it has stopped, as a node loss. The
// cleanup of StartCluster may shut it down again; that is harmless.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}
