package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/gcs/reservertest"
	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/benchgate"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// TestGCSScaleBench measures the GCS's placement-group loop at scale: the real GCS on its
// memory store, in this process, served over loopback gRPC; the nodes are synthetic DGX
// H100s registered over gRPC (8 GPUs in one NVLink island, 224 CPUs) whose raylet side of
// the two-phase reservation is the in-memory reserver of gcs/reservertest (no raylet
// processes: 10,000 of them cannot run on one machine). Each case fills every GPU with
// STRICT_SPREAD groups of whole nodes, then queues pending groups of ≥ 200 distinct shapes
// that cannot fit (every shape would fit one empty node), and prints:
//
//	BENCH gcs_round_ms_<n>n_<p>p <ms> ms          a node that could help every shape joins: from the join to the end of the round it triggers (median of 5 joins)
//	BENCH gcs_round_ms_<n>n_<p>p_parked <ms> ms   the same for a CPU-only node that helps no shape
//	BENCH gcs_new_group_ready_ms_p99 <ms> ms      (1,250 nodes) a new group that fits, create → CREATED, 100 in a row, each removed after
//	BENCH gcs_bytes_per_node <B> bytes            (10,000 nodes) live heap per registered node
//	BENCH gcs_bytes_per_pending_group <B> bytes   (10,000 nodes) live heap per pending group
//	BENCH gcs_pending_row_bytes <B> bytes         (10,000 nodes) one pending row, serialized
//	BENCH gcs_get_all_ms_10000 <ms> ms            (10,000 nodes) GetAllPlacementGroup over 10,000 rows
//
// RAYGO_BENCH_SCALE=small runs only the 1,250-node case. A case whose set-up does not
// finish within its limit prints no figure and says so.
func TestGCSScaleBench(t *testing.T) {
	benchgate.Require(t)
	cases := []scaleCase{{nodes: 1250, pending: 1000, newGroups: true, setupLimit: 10 * time.Minute}}
	if os.Getenv("RAYGO_BENCH_SCALE") != "small" {
		cases = append(cases, scaleCase{nodes: 10000, pending: 5000, memory: true, getAll: true, setupLimit: 10 * time.Minute})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dn_%dp", c.nodes, c.pending), func(t *testing.T) { runScaleCase(t, c) })
	}
}

type scaleCase struct {
	nodes, pending int
	newGroups      bool // measure gcs_new_group_ready_ms_p99
	memory         bool // measure gcs_bytes_per_pending_group
	getAll         bool // measure gcs_get_all_ms_10000
	setupLimit     time.Duration
}

// scaleGCS is one GCS with its clients.
type scaleGCS struct {
	t      *testing.T
	server *gcs.Server
	nodes  pb.NodeInfoServiceClient
	groups pb.PlacementGroupServiceClient
}

func startScaleGCS(t *testing.T) *scaleGCS { return startScaleGCSWithQueues(t, nil) }

// startScaleGCSWithQueues is startScaleGCS with a queue configuration (--queues).
func startScaleGCSWithQueues(t *testing.T, queues []byte) *scaleGCS {
	t.Helper()
	raylets := reservertest.New()
	cfg := gcs.DefaultConfig()
	cfg.Queues = queues
	cfg.Port = 0
	cfg.Store = store.NewMemory()
	cfg.WrapReserver = func(gcs.BundleReserver) gcs.BundleReserver { return raylets }
	cfg.NodeTimeout = 0 // the synthetic raylets never send heartbeats
	server, err := gcs.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	conn, err := rpcutil.Dial(server.Address(), rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &scaleGCS{t: t, server: server, nodes: pb.NewNodeInfoServiceClient(conn), groups: pb.NewPlacementGroupServiceClient(conn)}
}

// syntheticDGX is a DGX H100 as its raylet registers it: 8 H100s in one NVSwitch island,
// one rail each; gpus 0 makes a CPU-only node of cpus CPUs.
func syntheticDGX(id string, gpus int, cpus float64) *pb.NodeInfo {
	node := &pb.NodeInfo{NodeId: id, NodeName: id, RayletAddress: "127.0.0.1:1",
		ResourcesTotal: map[string]float64{"CPU": cpus, "memory": 2e12}}
	if gpus > 0 {
		node.ResourcesTotal["GPU"] = float64(gpus)
		node.Labels = map[string]string{"ray.io/accelerator-type": "H100"}
		for i := 0; i < gpus; i++ {
			node.Gpus = append(node.Gpus, &pb.GPUInfo{Index: int32(i), Uuid: fmt.Sprintf("GPU-%s-%d", id, i),
				Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NvlinkIsland: 0, Rail: int32(i)})
		}
	}
	node.ResourcesAvailable = maps.Clone(node.ResourcesTotal)
	return node
}

// parallel runs work(i) for i in [0, n) on 32 goroutines and returns the first error.
func parallel(n int, work func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := work(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// waitQuietRound waits for a round that started after since and decided nothing: every
// pending group was tried (or an identical one was) and waits.
func (g *scaleGCS) waitQuietRound(t *testing.T, since, deadline time.Time) {
	t.Helper()
	for {
		_, recent := g.server.SchedulerRounds()
		if n := len(recent); n > 0 && recent[n-1].Start.After(since) && recent[n-1].Attempts == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Skipf("not measured: no quiet scheduling round before the set-up limit")
		}
	}
}

func (g *scaleGCS) register(ctx context.Context, node *pb.NodeInfo) error {
	_, err := g.nodes.RegisterNode(ctx, &pb.RegisterNodeRequest{Node: node})
	return err
}

func (g *scaleGCS) create(ctx context.Context, strategy string, bundles []map[string]float64) (string, error) {
	// Detached: no driver renews a job lease during the set-up.
	req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: "detached", Namespace: "bench"}
	for _, b := range bundles {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: b})
	}
	reply, err := g.groups.CreatePlacementGroup(ctx, req)
	if err != nil {
		return "", err
	}
	return reply.PlacementGroup.PlacementGroupId, nil
}

func (g *scaleGCS) waitReady(ctx context.Context, id string) error {
	_, err := g.groups.WaitPlacementGroupUntilReady(ctx, &pb.WaitPlacementGroupUntilReadyRequest{PlacementGroupId: id})
	return err
}

// pendingShape is shape i of the pending groups: strategy, bundle count, GPUs and CPUs
// per bundle, all distinct for i < 216, each fitting one empty synthetic DGX.
func pendingShape(i int) (string, []map[string]float64) {
	strategy := []string{"STRICT_PACK", "PACK", "SPREAD"}[i%3]
	count := 1 + (i/3)%4
	gpus := float64(1 + (i/12)%2)
	cpus := float64(1 + (i/24)%9)
	bundles := make([]map[string]float64, count)
	for b := range bundles {
		bundles[b] = map[string]float64{"GPU": gpus, "CPU": cpus}
	}
	return strategy, bundles
}

const pendingShapes = 216

func runScaleCase(t *testing.T, c scaleCase) {
	ctx, cancel := context.WithTimeout(context.Background(), c.setupLimit+10*time.Minute)
	defer cancel()
	g := startScaleGCS(t)
	setupDeadline := time.Now().Add(c.setupLimit)
	setupCtx, cancelSetup := context.WithDeadline(ctx, setupDeadline)
	defer cancelSetup()
	start := time.Now()

	var heapEmpty runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapEmpty)
	if err := parallel(c.nodes, func(i int) error {
		return g.register(setupCtx, syntheticDGX(fmt.Sprintf("n%05d", i), 8, 224))
	}); err != nil {
		t.Skipf("not measured: registering %d nodes: %v", c.nodes, err)
	}
	if c.memory {
		// The scheduler's view holds the nodes once a round ran after they joined.
		g.waitQuietRound(t, time.Now(), setupDeadline)
		var heapNodes runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&heapNodes)
		fmt.Printf("BENCH gcs_bytes_per_node %.0f bytes\n", (float64(heapNodes.HeapAlloc)-float64(heapEmpty.HeapAlloc))/float64(c.nodes))
	}
	// Fill every GPU: STRICT_SPREAD groups of 50 whole nodes.
	const perFill = 50
	fills := (c.nodes + perFill - 1) / perFill
	if err := parallel(fills, func(i int) error {
		count := min(perFill, c.nodes-i*perFill)
		bundles := make([]map[string]float64, count)
		for b := range bundles {
			bundles[b] = map[string]float64{"GPU": 8, "CPU": 8}
		}
		id, err := g.create(setupCtx, "STRICT_SPREAD", bundles)
		if err != nil {
			return err
		}
		return g.waitReady(setupCtx, id)
	}); err != nil {
		t.Skipf("not measured: filling %d nodes did not finish within %s: %v", c.nodes, c.setupLimit, err)
	}
	t.Logf("%d nodes registered and filled in %s", c.nodes, time.Since(start).Round(time.Millisecond))

	var heapBefore runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapBefore)
	pendingIDs := make([]string, c.pending)
	if err := parallel(c.pending, func(i int) error {
		strategy, bundles := pendingShape(i % pendingShapes)
		id, err := g.create(setupCtx, strategy, bundles)
		pendingIDs[i] = id
		return err
	}); err != nil {
		t.Skipf("not measured: creating %d pending groups did not finish within %s: %v", c.pending, c.setupLimit, err)
	}
	// Wait until a round that started after the last create decided nothing: every
	// pending group was tried (or an identical one was) and waits.
	g.waitQuietRound(t, time.Now(), setupDeadline)
	if c.memory {
		// Measured before the client reads the table: only the GCS's memory is counted.
		var heapAfter runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&heapAfter)
		perGroup := (float64(heapAfter.HeapAlloc) - float64(heapBefore.HeapAlloc)) / float64(c.pending)
		fmt.Printf("BENCH gcs_bytes_per_pending_group %.0f bytes\n", perGroup)
	}
	// Every pending group says why it waits.
	for {
		reply, err := g.groups.GetAllPlacementGroup(setupCtx, &pb.GetAllPlacementGroupRequest{})
		if err != nil {
			t.Skipf("not measured: waiting for the first attempt of every pending group: %v", err)
		}
		untried := 0
		for _, row := range reply.PlacementGroups {
			if row.State == pb.PlacementGroupState_PENDING && row.PendingReason == "" {
				untried++
			}
		}
		if untried == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d pending groups queued and tried in %s", c.pending, time.Since(start).Round(time.Millisecond))

	if c.memory {
		reply, err := g.groups.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: pendingIDs[0]})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("BENCH gcs_pending_row_bytes %d bytes\n", proto.Size(reply.PlacementGroup))
	}

	name := fmt.Sprintf("gcs_round_ms_%dn_%dp", c.nodes, c.pending)
	joins := 0
	roundAfter := func(node *pb.NodeInfo) time.Duration {
		joins++
		before := time.Now()
		if err := g.register(ctx, node); err != nil {
			t.Fatal(err)
		}
		for {
			_, recent := g.server.SchedulerRounds()
			for _, r := range recent {
				if !r.Start.Before(before) {
					return r.Start.Add(r.Took).Sub(before)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	var helping, parked []time.Duration
	for i := 0; i < 5; i++ {
		helping = append(helping, roundAfter(syntheticDGX(fmt.Sprintf("join%02d", i), 8, 224)))
		time.Sleep(200 * time.Millisecond) // let the two-phase commits it started finish
		parked = append(parked, roundAfter(syntheticDGX(fmt.Sprintf("cpu%02d", i), 0, 1)))
	}
	t.Logf("%s joins: helping %v parked %v", name, helping, parked)
	fmt.Printf("BENCH %s %.1f ms\n", name, ms(median(helping)))
	fmt.Printf("BENCH %s_parked %.1f ms\n", name, ms(median(parked)))

	if c.newGroups {
		// A 1-CPU group fits every filled node (224 CPUs, 8 held).
		var took []time.Duration
		for i := 0; i < 100; i++ {
			begin := time.Now()
			id, err := g.create(ctx, "PACK", []map[string]float64{{"CPU": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.waitReady(ctx, id); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(begin))
			if _, err := g.groups.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(took)
		t.Logf("new group ready: p50 %v p99 %v max %v", took[49], took[98], took[99])
		fmt.Printf("BENCH gcs_new_group_ready_ms_p99 %.1f ms\n", ms(took[98]))
	}

	if c.getAll {
		// Top up to 10,000 rows with small CPU groups that are CREATED.
		reply, err := g.groups.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
		if err != nil {
			t.Fatal(err)
		}
		missing := 10000 - len(reply.PlacementGroups)
		topUp := make([]string, max(missing, 0))
		if err := parallel(len(topUp), func(i int) error {
			id, err := g.create(ctx, "PACK", []map[string]float64{{"CPU": 0.01}})
			topUp[i] = id
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Timed once they are CREATED: the read is measured on a settled table, not beside
		// the rounds that place them.
		if err := parallel(len(topUp), func(i int) error { return g.waitReady(ctx, topUp[i]) }); err != nil {
			t.Fatal(err)
		}
		var took []time.Duration
		rows := 0
		for i := 0; i < 5; i++ {
			begin := time.Now()
			reply, err := g.groups.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(begin))
			rows = len(reply.PlacementGroups)
		}
		t.Logf("GetAllPlacementGroup over %d rows: %v", rows, took)
		fmt.Printf("BENCH gcs_get_all_ms_10000 %.1f ms\n", ms(median(took)))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
