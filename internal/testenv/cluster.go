package testenv

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterReadyTimeout bounds how long a loopback cluster may take to elect
// its JetStream meta leader and see every peer (about 1.5 s on 2 cores).
const clusterReadyTimeout = 20 * time.Second

// RunCluster starts an n-node JetStream cluster on loopback, each node
// storing under its own temporary directory, and returns once the meta
// leader sees all n peers, so R-n streams can be created at once. The nodes
// stop when the test ends.
func RunCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("RunCluster: need at least one node, got %d", n)
	}
	// The route ports are reserved, then freed for the servers to take: a
	// connection of another test may take one meanwhile, and the cluster
	// is then started again on others.
	var err error
	for try := 1; try <= 3; try++ {
		var servers []*server.Server
		if servers, err = startCluster(t, n); err == nil {
			return servers
		}
		t.Logf("RunCluster: try %d: %v", try, err)
	}
	t.Fatalf("RunCluster: %v", err)
	return nil
}

// startCluster is one try of RunCluster.
func startCluster(t testing.TB, n int) ([]*server.Server, error) {
	ports := freePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	// A name per cluster keeps concurrently running test clusters apart.
	name := fmt.Sprintf("C%d", ports[0])
	servers := make([]*server.Server, 0, n)
	stopAll := func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for i := range n {
		opts := natsserver.DefaultTestOptions
		opts.Port = -1
		opts.ServerName = fmt.Sprintf("%s-n%d", name, i+1)
		opts.JetStream = true
		opts.StoreDir = t.TempDir()
		opts.Cluster = server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		s, err := startServer(&opts)
		if err != nil {
			stopAll()
			return nil, err
		}
		servers = append(servers, s)
	}
	deadline := time.Now().Add(clusterReadyTimeout)
	for !clusterReady(servers) {
		if time.Now().After(deadline) {
			stopAll()
			return nil, fmt.Errorf("%d-node cluster had no JetStream meta leader seeing all peers after %s", n, clusterReadyTimeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Cleanup(stopAll)
	return servers, nil
}

// ClusterURL joins the client URLs of servers, for a client that fails over
// between them.
func ClusterURL(servers []*server.Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// ConnectCluster opens a client connection to any of servers that is closed
// when the test ends.
func ConnectCluster(t testing.TB, servers []*server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(ClusterURL(servers), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to embedded NATS cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

func clusterReady(servers []*server.Server) bool {
	leaderSeesAll := false
	for _, s := range servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(servers) {
			leaderSeesAll = true
		}
	}
	return leaderSeesAll
}

// freePorts reserves n distinct loopback ports, holding every listener until
// all are chosen so the kernel cannot hand the same port out twice.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve a loopback port: %v", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
