package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet"
	"github.com/raygo-dev/raygo/tests/harness"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times.
const clockTicks = 100

// cpuTicks is a process's user + system CPU time so far, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command may hold spaces; the fields after its closing parenthesis are fixed.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// rssMiB is a process's resident set, in MiB.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kib, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kib / 1024
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// cpuPercent is what the processes used of one core over window.
func cpuPercent(t *testing.T, window time.Duration, pids ...int) float64 {
	t.Helper()
	var before int64
	for _, pid := range pids {
		before += cpuTicks(t, pid)
	}
	time.Sleep(window)
	var after int64
	for _, pid := range pids {
		after += cpuTicks(t, pid)
	}
	return float64(after-before) / clockTicks / window.Seconds() * 100
}

// quietRaylets answers, for every synthetic node, what the GCS asks a raylet that just
// registered (its workers; the bundles to release): nothing.
type quietRaylets struct {
	pb.UnimplementedNodeManagerServiceServer
}

func (quietRaylets) GetWorkers(context.Context, *pb.GetWorkersRequest) (*pb.GetWorkersReply, error) {
	return &pb.GetWorkersReply{}, nil
}

func (quietRaylets) ReleaseUnusedBundles(context.Context, *pb.ReleaseUnusedBundlesRequest) (*pb.ReleaseUnusedBundlesReply, error) {
	return &pb.ReleaseUnusedBundlesReply{}, nil
}

// TestGCSIdleCPUBench is `BENCH gcs_idle_cpu_pct_10000n`: a GCS started as a process
// (`raygo start --head`, memory store) with 10,000 synthetic raylets in this process.
// They register over loopback gRPC with a DGX H100's resources, answer the GCS's calls
// on one loopback server, and report as an idle raylet does (raylet.IdleReports: what
// the real raylet sends, and how often, when nothing changes). The figure is the GCS
// process's CPU over 20 s of that, in % of one core.
func TestGCSIdleCPUBench(t *testing.T) {
	benchgate.Require(t)
	const nodes = 10000
	c := harness.StartHead(t, "--num-cpus", "1", "--log-level", "warn")

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	pb.RegisterNodeManagerServiceServer(server, quietRaylets{})
	go func() { _ = server.Serve(listener) }()
	defer server.Stop()

	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewNodeInfoServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	start := time.Now()
	ids, secrets := make([]string, nodes), make(map[string]string, nodes)
	var secretsMu sync.Mutex
	if err := parallel(nodes, func(i int) error {
		node := syntheticDGX(fmt.Sprintf("s%05d", i), 8, 224)
		node.RayletAddress = listener.Addr().String()
		ids[i] = node.NodeId
		reply, err := client.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
		if err == nil {
			secretsMu.Lock()
			secrets[node.NodeId] = reply.NodeSecret
			secretsMu.Unlock()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d synthetic raylets registered in %s", nodes, time.Since(start).Round(time.Millisecond))

	// Each synthetic raylet reports as an idle raylet does, from a random phase.
	policy := raylet.IdleReports(raylet.DefaultConfig(), syntheticDGX("", 8, 224).ResourcesTotal)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent sync.Map
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := ids[w*nodes/64 : (w+1)*nodes/64]
			count := 0
			tick := time.NewTicker(policy.Every / time.Duration(len(mine)))
			defer tick.Stop()
			for i := 0; ; i = (i + 1) % len(mine) {
				select {
				case <-stop:
					sent.Store(w, count)
					return
				case <-tick.C:
				}
				request := policy.Request(mine[i])
				request.NodeSecret = secrets[mine[i]] // read-only once registered
				if _, err := client.ReportHeartbeat(ctx, request); err != nil {
					t.Error(err)
				}
				count++
			}
		}()
	}
	time.Sleep(5 * time.Second) // settle
	pct := cpuPercent(t, 20*time.Second, c.Head.GCSPID)
	close(stop)
	wg.Wait()
	total := 0
	sent.Range(func(_, v any) bool { total += v.(int); return true })
	t.Logf("idle reports every %s per node (%d sent); GCS CPU %.1f%% of a core", policy.Every, total, pct)
	fmt.Printf("BENCH gcs_idle_cpu_pct_10000n %.1f %%\n", pct)
}

// TestClusterOf100RayletsBench starts a head and 99 more nodes as `raygo start`
// processes on loopback (100 raylets, memory store) and prints:
//
//	BENCH cluster_100_alive_s <s> s        from the first start to all 100 nodes ALIVE
//	BENCH raylet_rss_mib <MiB> MiB          median raylet RSS, idle
//	BENCH gcs_rss_mib_100n <MiB> MiB        the GCS's RSS
//	BENCH cluster_100_idle_cpu_pct <%> %    GCS and raylets (gossip, heartbeats), idle, in % of one core
func TestClusterOf100RayletsBench(t *testing.T) {
	benchgate.Require(t)
	const total = 100
	start := time.Now()
	c := harness.StartHead(t, "--num-cpus", "1", "--log-level", "warn")
	for i := 1; i < total; i++ {
		c.AddNode("--num-cpus", "1", "--log-level", "warn")
	}
	for {
		nodes, err := c.Nodes()
		alive := 0
		for _, n := range nodes {
			if n.State == pb.NodeState_ALIVE {
				alive++
			}
		}
		if err == nil && alive == total {
			break
		}
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("only %d of %d nodes ALIVE after 10 minutes", alive, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	aliveAfter := time.Since(start)
	time.Sleep(5 * time.Second) // settle
	pids := []int{c.Head.GCSPID, c.Head.RayletPID}
	var rss []float64
	for _, n := range append([]*harness.Node{c.Head}, c.Workers...) {
		rss = append(rss, rssMiB(t, n.RayletPID))
		if n != c.Head {
			pids = append(pids, n.RayletPID)
		}
	}
	slices.Sort(rss)
	cpu := cpuPercent(t, 20*time.Second, pids...)
	fmt.Printf("BENCH cluster_100_alive_s %.1f s\n", aliveAfter.Seconds())
	fmt.Printf("BENCH raylet_rss_mib %.1f MiB\n", rss[len(rss)/2])
	fmt.Printf("BENCH gcs_rss_mib_100n %.1f MiB\n", rssMiB(t, c.Head.GCSPID))
	fmt.Printf("BENCH cluster_100_idle_cpu_pct %.1f %%\n", cpu)
}
