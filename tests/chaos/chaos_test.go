// Package chaos runs a seeded, bounded sequence of placement-group creates and removes,
// task submissions and actor creates, calls and kills (the Go SDK, with this test binary
// as the driver and the workers) on a cluster of raygo processes with the Redis store
// (append-only file, synced on every write) and auth on (a token of the run's), injecting a fault at random points: SIGKILL of the GCS (its supervisor
// restarts it), SIGKILL of a worker node's raylet (a new node replaces it), SIGSTOP and
// SIGCONT of a raylet, SIGKILL of Redis (requests meanwhile) then of the GCS; and with
// RAYGO_CHAOS_NETWORK=1 (`make chaos`): delay and loss on one raylet's connection to the
// GCS (a user-space proxy, internal/testutil/faultproxy), and, when the run created the
// test's network namespace (RAYGO_OWN_NETNS=1, scripts/in-netns.sh), a partition of a
// raylet in a second namespace the test creates, by taking their veth link down. After
// every step it waits for the cluster to settle and checks DESIGN.md's invariants with
// `raygo debug check-invariants` and that nothing acknowledged was lost: every group
// whose create was answered exists, every group whose removal was answered is REMOVED,
// every submitted task resolves (a wrong answer fails the run), every created actor is
// ALIVE and answers, every killed one is DEAD.
//
// `make test` runs a short sequence of kills and stops, on loopback, with no privileges;
// RAYGO_CHAOS_STEPS and RAYGO_CHAOS_SEED choose another (`make chaos`).
package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/testutil/faultproxy"
	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

type faultKind string

const (
	killGCS    faultKind = "sigkill_gcs"
	killRaylet faultKind = "sigkill_raylet"
	stopRaylet faultKind = "sigstop_raylet"
	restartDB  faultKind = "sigkill_redis_then_gcs"
	lossyLink  faultKind = "loss_and_delay"
	partition  faultKind = "partition_raylet"
	noFault    faultKind = "none"
)

// worker is a worker node and how to start its replacement.
type worker struct {
	node    *harness.Node
	options harness.NodeOptions
	extra   []string
	role    string // "", "lossy" (behind the proxy), "partitionable" (in the peer namespace)
}

// settleLimit bounds how long the cluster may take to settle after one step.
const settleLimit = 60 * time.Second

func envInt(t *testing.T, name string, fallback int) int {
	value := os.Getenv(name)
	if value == "" {
		return fallback
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: must be a whole number >= 0", name, value)
	}
	return n
}

func TestChaos(t *testing.T) {
	steps := envInt(t, "RAYGO_CHAOS_STEPS", 12)
	seed := uint64(envInt(t, "RAYGO_CHAOS_SEED", 1))
	rng := rand.New(rand.NewPCG(seed, seed))
	bin := harness.Binary(t)
	redis := redisserver.Start(t)
	kinds := []faultKind{killGCS, killRaylet, stopRaylet, restartDB, noFault}
	var notInjected []string
	network := os.Getenv("RAYGO_CHAOS_NETWORK") == "1"
	var peer *peerNamespace
	headIP := "127.0.0.1"
	switch {
	case !network:
		notInjected = append(notInjected, string(lossyLink)+" and "+string(partition)+" (RAYGO_CHAOS_NETWORK=1, as make chaos sets, turns them on)")
	case os.Getenv("RAYGO_OWN_NETNS") != "1":
		kinds = append(kinds, lossyLink)
		notInjected = append(notInjected, string(partition)+" (the run did not create the test's network namespace: scripts/in-netns.sh could not)")
	default:
		kinds = append(kinds, lossyLink, partition)
		peer = newPeerNamespace(t)
		headIP = peer.ownIP
	}
	// Auth on, with a token of the run's own: every call of the daemons, the CLI, the SDK
	// and the workers carries it through the faults.
	token, err := auth.Generate()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(auth.EnvMode, string(auth.ModeToken))
	t.Setenv(auth.EnvToken, token)
	c := harness.StartHeadOn(t, headIP, nil, "--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "chaos", "--num-cpus", "2")
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, filepath.Join(c.Head.LogDir, "gcs.log"), 120)
			for _, n := range append([]*harness.Node{c.Head}, c.Workers...) {
				t.Logf("node %s raylet pid %d alive %v", n.NodeID, n.RayletPID, harness.ProcessAlive(n.RayletPID))
				logTail(t, filepath.Join(n.LogDir, "raylet.log"), 25)
			}
		}
	})
	var workers []*worker
	start := func(w *worker) *worker {
		w.node = c.AddNodeWith(w.options, w.extra...)
		return w
	}
	nodeArgs := []string{"--num-cpus", "2", "--resources", fmt.Sprintf(`{%q: 2}`, taskSlot)}
	for range 3 {
		workers = append(workers, start(&worker{extra: nodeArgs}))
	}
	var proxy *faultproxy.Proxy
	if network {
		if proxy, err = faultproxy.Start(c.GCSAddress, seed); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = proxy.Close() })
		workers = append(workers, start(&worker{role: "lossy", options: harness.NodeOptions{GCSAddress: proxy.Addr()}, extra: nodeArgs}))
	}
	if peer != nil {
		workers = append(workers, start(&worker{role: "partitionable", options: harness.NodeOptions{Prefix: peer.prefix()},
			extra: append(slices.Clone(nodeArgs), "--node-ip-address", peer.peerIP)}))
	}
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	load := newSDKLoad(t, c.GCSAddress, rng)

	acked := map[string]bool{}   // created, and not removed
	removed := map[string]bool{} // removal answered
	faults := map[faultKind]int{}
	var recoveries []time.Duration
	byKind := map[faultKind][]time.Duration{}
	strategies := []string{"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}
	// operate makes a few creates and removes of groups, recording those that were
	// answered OK (while the GCS or Redis is down they fail), then a task or actor request.
	operate := func() {
		defer load.operate()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for range 1 + rng.IntN(3) {
			if rng.IntN(3) > 0 || len(acked) == 0 {
				req := &pb.CreatePlacementGroupRequest{Strategy: strategies[rng.IntN(len(strategies))], Lifetime: "detached"}
				for range 1 + rng.IntN(3) {
					req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"CPU": 0.5}})
				}
				if reply, err := pgs.CreatePlacementGroup(ctx, req); err == nil {
					acked[reply.PlacementGroup.PlacementGroupId] = true
				}
				continue
			}
			id := sortedKeys(acked)[rng.IntN(len(acked))]
			if _, err := pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err == nil {
				delete(acked, id)
				removed[id] = true
			}
		}
	}
	for step := range steps {
		operate()
		kind := kinds[rng.IntN(len(kinds))]
		faults[kind]++
		t.Logf("step %d: %s", step, kind)
		var pause time.Duration // of the recovery, spent before the settling
		switch kind {
		case killGCS:
			kill(t, c.Head.ReadRecord(t).GCSPID, syscall.SIGKILL)
		case killRaylet:
			w := workers[rng.IntN(len(workers))]
			t.Logf("step %d: kill the raylet of node %s (%q)", step, w.node.NodeID, w.role)
			kill(t, w.node.RayletPID, syscall.SIGKILL)
			start(w)
		case stopRaylet:
			pid := workers[rng.IntN(len(workers))].node.RayletPID
			kill(t, pid, syscall.SIGSTOP)
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			kill(t, pid, syscall.SIGCONT)
		case restartDB:
			// Requests while Redis is down, then a GCS restart: what was answered OK then
			// must still hold once the GCS reloads its tables.
			redis.Kill()
			operate()
			redis.Restart()
			kill(t, c.Head.ReadRecord(t).GCSPID, syscall.SIGKILL)
		case lossyLink:
			// Requests while one raylet's connection to the GCS is slow and lossy.
			proxy.SetFaults(faultproxy.Faults{Delay: time.Duration(20+rng.IntN(280)) * time.Millisecond, Loss: 0.05 + 0.25*rng.Float64()})
			operate()
			time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
			proxy.SetFaults(faultproxy.Faults{})
		case partition:
			// Requests while a raylet is cut off, for a moment or for long enough that the
			// GCS's failure detector gives it up.
			peer.setLink(t, false)
			operate()
			hold := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
			if rng.IntN(2) == 0 {
				hold = time.Duration(10+rng.IntN(10)) * time.Second
			}
			time.Sleep(hold)
			peer.setLink(t, true)
			// Healed, the raylet either goes on as the same node or, declared dead meanwhile,
			// hears so and exits (a new node replaces it below).
			w := workerWithRole(t, workers, "partitionable")
			rejoined := harness.Eventually(t, settleLimit, fmt.Sprintf("step %d: the partitioned raylet is ALIVE again or has exited", step), func() error {
				if !harness.ProcessAlive(w.node.RayletPID) {
					return nil
				}
				nodes, err := c.Nodes()
				if err != nil {
					return err
				}
				if n := harness.FindNode(nodes, w.node.NodeID); n == nil || n.State != pb.NodeState_ALIVE {
					return fmt.Errorf("node %s is %v and its raylet still runs", w.node.NodeID, n.GetState())
				}
				return nil
			})
			pause += rejoined
		}
		// A raylet the GCS gave up during a fault stops; a new node replaces it.
		for _, w := range workers {
			if !harness.ProcessAlive(w.node.RayletPID) {
				w.node.Stop()
				start(w)
			}
		}
		waited := newWaitLog()
		settling := harness.Eventually(t, settleLimit, fmt.Sprintf("step %d (%s): settled, nothing lost, invariants kept", step, kind), func() error {
			if err := settled(t, bin, c.GCSAddress, pgs, acked, removed); err != nil {
				return waited.record(err)
			}
			return waited.record(load.settled(t))
		})
		if settling > slowSettle {
			t.Logf("chaos slow step %d (%s): settled after %s, from %s; waited on: %s", step, kind, settling.Round(time.Millisecond), waited.start.UTC().Format("15:04:05.000"), waited)
		}
		took := pause + settling
		recoveries = append(recoveries, took)
		byKind[kind] = append(byKind[kind], took)
	}
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	var counts []string
	for kind, n := range faults {
		counts = append(counts, fmt.Sprintf("%s %d", kind, n))
	}
	sort.Strings(counts)
	t.Logf("chaos seed %d: %d steps; faults: %s; groups acknowledged %d, removals acknowledged %d; lost 0, double-allocated 0, leaked 0; recovery p50 %s, max %s",
		seed, steps, strings.Join(counts, ", "), len(acked)+len(removed), len(removed), recoveries[len(recoveries)/2], recoveries[len(recoveries)-1])
	t.Logf("chaos load: %s", load.report())
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		took := byKind[kind]
		slices.Sort(took)
		t.Logf("chaos recovery %s: %d steps, p50 %s, p99 %s", kind, len(took), took[len(took)/2], took[min(len(took)-1, len(took)*99/100)])
	}
	if len(notInjected) > 0 {
		t.Logf("chaos faults not injected: %s", strings.Join(notInjected, "; "))
	}
}

// slowSettle is how long a step may take to settle before the test logs what the
// settling waited on: a slow step that passes otherwise leaves no trace of its cause.
const slowSettle = 2 * time.Second

// waitLog records what a settling check returned while it was polled: each change of
// its error, with how long after the start of the settling it came.
type waitLog struct {
	start   time.Time
	last    string
	changes []string
}

func newWaitLog() *waitLog { return &waitLog{start: time.Now()} }

// record notes err if it differs from the previous check's, and returns it.
func (w *waitLog) record(err error) error {
	what := "settled"
	if err != nil {
		what = err.Error()
	}
	if what != w.last {
		w.last = what
		w.changes = append(w.changes, fmt.Sprintf("+%s %s", time.Since(w.start).Round(time.Millisecond), what))
	}
	return err
}

// String lists the changes, the first and last few of a long list.
func (w *waitLog) String() string {
	const keep = 6
	if len(w.changes) <= 2*keep {
		return strings.Join(w.changes, "; ")
	}
	return fmt.Sprintf("%s; (%d more); %s", strings.Join(w.changes[:keep], "; "), len(w.changes)-2*keep, strings.Join(w.changes[len(w.changes)-keep:], "; "))
}

// settled checks that every acknowledged create and removal holds, no group is still
// being placed, and `raygo debug check-invariants` finds nothing.
func settled(t *testing.T, bin, gcsAddress string, pgs pb.PlacementGroupServiceClient, acked, removed map[string]bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		return err
	}
	seen := map[string]pb.PlacementGroupState{}
	for _, g := range reply.PlacementGroups {
		seen[g.PlacementGroupId] = g.State
		switch {
		case g.State == pb.PlacementGroupState_PREPARED:
			return fmt.Errorf("group %s still %s", g.PlacementGroupId, g.State)
		case g.State == pb.PlacementGroupState_RESCHEDULING && !waitingForRoom(g):
			return fmt.Errorf("group %s still %s (%s: %s)", g.PlacementGroupId, g.State, g.PendingReasonCode, g.PendingReason)
		}
	}
	for id := range acked {
		if state, ok := seen[id]; !ok || state == pb.PlacementGroupState_REMOVED {
			return fmt.Errorf("LOST: acknowledged group %s is %v", id, state)
		}
	}
	for id := range removed {
		if state, ok := seen[id]; ok && state != pb.PlacementGroupState_REMOVED {
			return fmt.Errorf("LOST: acknowledged removal of %s, the group is %s", id, state)
		}
	}
	stdout, stderr, code := harness.Run(t, bin, []string{"debug", "check-invariants", "--address", gcsAddress, "--views", "2", "--interval", "200ms"})
	if code != 0 {
		return fmt.Errorf("check-invariants exit %d: %s %s", code, strings.TrimSpace(stdout), strings.TrimSpace(stderr))
	}
	return nil
}

// waitingForRoom reports whether a group waits because the cluster has no room for it
// now: a group that lost bundles with a node is RESCHEDULING until room frees up, which
// in a full cluster is not the fault's doing. A death the GCS learns late (recorded while
// Redis was down, it is found again only when the reconnect grace ends) gives the
// replacement node's room to groups queued meanwhile.
func waitingForRoom(g *pb.PlacementGroupInfo) bool {
	switch pending.Reason(g.PendingReasonCode) {
	case pending.NoResources, pending.Fragmented:
		return true
	}
	return false
}

func kill(t *testing.T, pid int, signal syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, signal); err != nil {
		t.Fatalf("signal %v to pid %d: %v", signal, pid, err)
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// logTail logs the last lines of a daemon's log, for a failed run.
func logTail(t *testing.T, path string, lines int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: %v", path, err)
		return
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	t.Logf("last lines of %s:\n%s", path, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

func workerWithRole(t *testing.T, workers []*worker, role string) *worker {
	t.Helper()
	for _, w := range workers {
		if w.role == role {
			return w
		}
	}
	t.Fatalf("no %q worker", role)
	return nil
}
