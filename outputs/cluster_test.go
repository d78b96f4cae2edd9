package outputs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

// TestCaptureOnR3Cluster: on a 3-node cluster the outputs bucket is
// provisioned R3; a capture stored there is read whole from the other
// nodes after the bucket's leader goes away, and a capture made after it
// is stored too.
func TestCaptureOnR3Cluster(t *testing.T) {
	servers := testenv.RunCluster(t, 3)
	_, js := testenv.ConnectCluster(t, servers)
	// The whole test, captures included: under CI's -race on 2 busy cores the
	// capture before the leader leaves took 90 s of a former 2 min.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	names := protocol.MustNames("")
	res, err := provision.Ensure(ctx, js, names, provision.Options{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+names.OutputsBucket())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.Config.Replicas != 3 {
		t.Fatalf("outputs bucket replicas: %+v, %v", info, err)
	}

	ws := t.TempDir()
	write(t, ws, "out/big.txt", strings.Repeat("a line of the agent's output\n", 600_000)) // ~17 MiB
	for i := range 50 {
		write(t, ws, filepath.Join("out", "f"+itoa(i)), "file "+itoa(i)+"\n")
	}
	first, err := outputs.Capture(ctx, res.Outputs, "r3-a", ws, nil, outputs.Policy{Diff: true, Files: []string{"out/**"}})
	if err != nil || first.Error != "" || len(first.Outputs) != 52 {
		t.Fatalf("capture on R3: %+v, %v", first, err)
	}

	// The bucket's leader goes away; the objects are read from the others.
	leader := info.Cluster.Leader
	var rest []int
	for i, s := range servers {
		if s.Name() == leader {
			s.Shutdown()
			s.WaitForShutdown()
			continue
		}
		rest = append(rest, i)
	}
	if len(rest) != 2 {
		t.Fatalf("leader %q is none of the nodes", leader)
	}
	_, js2 := testenv.ConnectCluster(t, servers[rest[0]:rest[0]+1])
	// Each attempt has its own bound: while the cluster elects new leaders a
	// JetStream API request can go unanswered, and one attempt waiting on the
	// whole test's context would use up every retry.
	attempt := func(bound time.Duration, f func(context.Context) error) func() bool {
		return func() bool {
			actx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			err = f(actx)
			return err == nil
		}
	}
	var obs jetstream.ObjectStore
	testenv.WaitFor(t, 60*time.Second, "the outputs bucket after its leader left", attempt(5*time.Second, func(actx context.Context) (err error) {
		obs, err = js2.ObjectStore(actx, names.OutputsBucket())
		return err
	}))
	for _, o := range first.Outputs {
		var b []byte
		testenv.WaitFor(t, 60*time.Second, "reading "+o.Name+" after the leader left", attempt(5*time.Second, func(actx context.Context) (err error) {
			b, err = obs.GetBytes(actx, o.Name)
			return err
		}))
		if uint64(len(b)) != o.Size || digest(b) != o.Digest {
			t.Fatalf("%s after failover: %d bytes %s, listed %+v", o.Name, len(b), digest(b), o)
		}
	}
	// A capture after the failover is stored (R3 on the two left).
	if err := os.Remove(filepath.Join(ws, "out", "f0")); err != nil {
		t.Fatal(err)
	}
	var second outputs.Result
	testenv.WaitFor(t, 90*time.Second, "a capture after the failover", attempt(60*time.Second, func(actx context.Context) (err error) {
		second, err = outputs.Capture(actx, obs, "r3-b", ws, nil, outputs.Policy{Diff: true, Files: []string{"out/**"}})
		return err
	}))
	if second.Error != "" || len(second.Outputs) != 51 {
		t.Fatalf("capture after failover: %+v", second)
	}
}
