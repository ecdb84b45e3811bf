// Package integration runs real raygo processes on loopback: a head and raylets started
// with `raygo start --block`, a real redis-server, SIGKILL for failures.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/redisserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

func aliveCount(nodes []*pb.NodeInfo) int {
	n := 0
	for _, node := range nodes {
		if node.State == pb.NodeState_ALIVE {
			n++
		}
	}
	return n
}

func TestHeadAndThreeRayletsRegisterWithResourcesAndLabels(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "4", "--resources", `{"accelerator_x": 1.5}`)
	for i := 0; i < 3; i++ {
		c.AddNode("--num-cpus", "2", "--labels", fmt.Sprintf("rack=r%d,zone=a", i), "--node-name", fmt.Sprintf("worker-%d", i))
	}
	stdout, stderr, code := c.Run("list", "nodes", "--format", "json")
	if code != 0 {
		t.Fatalf("list nodes: exit %d: %s", code, stderr)
	}
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(stdout), &nodes); err != nil {
		t.Fatalf("list nodes --format json: %v\n%s", err, stdout)
	}
	if len(nodes) != 4 {
		t.Fatalf("list nodes: %d nodes, want 4", len(nodes))
	}
	for _, key := range []string{"node_id", "node_ip", "node_name", "is_head_node", "state", "resources_total", "resources_available", "labels", "is_draining"} {
		if _, ok := nodes[0][key]; !ok {
			t.Errorf("list nodes JSON lacks Ray's field %q", key)
		}
	}
	// --detail false: Ray's base columns only, as `ray list nodes --format json`.
	stdout, stderr, code = c.Run("list", "nodes", "--format", "json", "--detail", "false")
	var base []map[string]any
	if err := json.Unmarshal([]byte(stdout), &base); code != 0 || err != nil || len(base) != 4 {
		t.Fatalf("list nodes --detail false: exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	if got, want := slices.Sorted(maps.Keys(base[0])), []string{"is_head_node", "labels", "node_id", "node_ip", "node_name", "resources_total", "state", "state_message"}; !slices.Equal(got, want) {
		t.Errorf("list nodes --detail false: columns %v, want Ray's base columns %v", got, want)
	}
	head := nodes[0]
	if head["is_head_node"] != true || head["node_id"] != c.Head.NodeID {
		t.Fatalf("first node is not the head: %v", head)
	}
	total := head["resources_total"].(map[string]any)
	if total["CPU"] != 4.0 || total["accelerator_x"] != 1.5 || total["GPU"] != 0.0 || total["memory"].(float64) <= 0 {
		t.Errorf("head resources_total = %v, want CPU 4, accelerator_x 1.5, GPU 0 (no NVML here), memory > 0", total)
	}
	labels := head["labels"].(map[string]any)
	if labels["ray.io/node-id"] != c.Head.NodeID {
		t.Errorf("head labels = %v, want ray.io/node-id = its node id", labels)
	}
	for i, w := range nodes[1:] {
		l := w["labels"].(map[string]any)
		if l["zone"] != "a" || !strings.HasPrefix(l["rack"].(string), "r") || l["ray.io/node-id"] != w["node_id"] {
			t.Errorf("worker %d labels = %v", i, l)
		}
		if w["state"] != "ALIVE" || w["resources_total"].(map[string]any)["CPU"] != 2.0 {
			t.Errorf("worker %d = %v", i, w)
		}
	}
	// Every raylet bound its own free ports on the one machine.
	seen := map[string]bool{}
	for _, n := range nodes {
		addr := n["raylet_address"].(string)
		if seen[addr] {
			t.Fatalf("two raylets share the address %s", addr)
		}
		seen[addr] = true
	}
	status, stderr, code := c.Run("status")
	if code != 0 || !strings.Contains(status, "Alive: 4") || !strings.Contains(status, "0.0/10.0 CPU") {
		t.Fatalf("status (exit %d, %s):\n%s", code, stderr, status)
	}
}

func TestKilledRayletIsDeadWithinTenSeconds(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t)
	for i := 0; i < 3; i++ {
		c.AddNode()
	}
	victim := c.Workers[1]
	harness.Eventually(t, 10*time.Second, "4 nodes ALIVE", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		if n := aliveCount(nodes); n != 4 {
			return fmt.Errorf("%d alive", n)
		}
		return nil
	})
	victim.Kill() // SIGKILL of the supervisor: the raylet gets SIGKILL from the kernel
	if harness.ProcessAlive(victim.RayletPID) {
		// Pdeathsig delivery is asynchronous; it must still happen promptly.
		harness.Eventually(t, 2*time.Second, "raylet process gone", func() error {
			if harness.ProcessAlive(victim.RayletPID) {
				return fmt.Errorf("raylet pid %d alive", victim.RayletPID)
			}
			return nil
		})
	}
	took := harness.Eventually(t, 10*time.Second, "killed raylet marked DEAD", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		n := harness.FindNode(nodes, victim.NodeID)
		if n == nil || n.State != pb.NodeState_DEAD {
			return fmt.Errorf("node %s: %v", victim.NodeID, n.GetState())
		}
		if n.DeathReason == "" {
			return fmt.Errorf("DEAD without a reason")
		}
		return nil
	})
	t.Logf("DEAD %s after SIGKILL", took.Round(time.Millisecond))
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	if n := aliveCount(nodes); n != 3 {
		t.Fatalf("%d nodes ALIVE after one death, want 3", n)
	}
	// A restarted raylet is a new node, as in Ray.
	again := c.AddNode()
	if again.NodeID == victim.NodeID {
		t.Fatalf("restarted raylet reused node id %s", again.NodeID)
	}
}

func TestGCSKilledOnRedisRestartsAndLiveRayletsReconnect(t *testing.T) {
	t.Parallel()
	redis := redisserver.Start(t)
	c := harness.StartHead(t, "--store", "redis", "--redis-address", redis.Addr, "--redis-namespace", "gcs-restart")
	for i := 0; i < 3; i++ {
		c.AddNode()
	}
	gcs := harness.Dial(t, c.GCSAddress)
	ctx := context.Background()
	before, err := gcs.Nodes.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gcs.KV.KVPut(ctx, &pb.KVPutRequest{Namespace: "ns", Key: []byte("k"), Value: []byte("v"), Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	// A raylet that dies while the GCS is down must not come back ALIVE.
	lost := c.Workers[2]
	lost.Kill()
	oldGCS := c.Head.ReadRecord(t).GCSPID
	if err := killPID(oldGCS); err != nil {
		t.Fatal(err)
	}

	var after *pb.GetClusterInfoReply
	harness.Eventually(t, 30*time.Second, "GCS restarted by the head's supervisor", func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		info, err := gcs.Nodes.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
		if err != nil {
			return err
		}
		if info.GcsEpoch <= before.GcsEpoch {
			return fmt.Errorf("epoch %d, not newer than %d", info.GcsEpoch, before.GcsEpoch)
		}
		after = info
		return nil
	})
	if after.GcsEpoch != before.GcsEpoch+1 {
		t.Errorf("epoch after restart = %d, want the persisted %d + 1", after.GcsEpoch, before.GcsEpoch)
	}
	if got := c.Head.ReadRecord(t).GCSPID; got == oldGCS || !harness.ProcessAlive(got) {
		t.Fatalf("GCS pid after restart = %d (old %d)", got, oldGCS)
	}
	live := []*harness.Node{c.Head, c.Workers[0], c.Workers[1]}
	harness.Eventually(t, 30*time.Second, "live raylets ALIVE and reconnected to the new GCS", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		if len(nodes) != 4 {
			return fmt.Errorf("%d nodes listed, want 4", len(nodes))
		}
		for _, n := range live {
			info := harness.FindNode(nodes, n.NodeID)
			if info.State != pb.NodeState_ALIVE || info.StateMessage != "" {
				return fmt.Errorf("node %s: %s %q", n.NodeID, info.State, info.StateMessage)
			}
			stats, err := harness.Dial(t, info.RayletAddress).NodeManager.GetNodeStats(ctx, &pb.GetNodeStatsRequest{})
			if err != nil {
				return err
			}
			if stats.GcsEpoch != after.GcsEpoch {
				return fmt.Errorf("raylet %s still at epoch %d", n.NodeID, stats.GcsEpoch)
			}
		}
		return nil
	})
	for _, n := range live {
		if !harness.ProcessAlive(n.RayletPID) {
			t.Fatalf("raylet %d was restarted or died; it must have reconnected on its own", n.RayletPID)
		}
	}
	value, err := gcs.KV.KVGet(ctx, &pb.KVGetRequest{Namespace: "ns", Key: []byte("k")})
	if err != nil || string(value.Value) != "v" {
		t.Fatalf("KV after GCS restart: %v %v", value, err)
	}
	// The reconnect grace is 30 s after the restart.
	harness.Eventually(t, 40*time.Second, "the raylet that died while the GCS was down is DEAD", func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		n := harness.FindNode(nodes, lost.NodeID)
		if n.State != pb.NodeState_DEAD {
			return fmt.Errorf("state %s %q", n.State, n.StateMessage)
		}
		return nil
	})
}

func TestDrainKeepsNodeAliveAndFlagsIt(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t)
	w := c.AddNode()
	stdout, stderr, code := c.Run("drain", w.NodeID[:10], "--reason", "spot interruption")
	if code != 0 {
		t.Fatalf("drain: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, w.NodeID) {
		t.Errorf("drain output does not name the node: %s", stdout)
	}
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	n := harness.FindNode(nodes, w.NodeID)
	if n.State != pb.NodeState_ALIVE || !n.IsDraining || n.DrainReason != "spot interruption" {
		t.Fatalf("drained node = %s draining=%t reason=%q", n.State, n.IsDraining, n.DrainReason)
	}
	stats, err := harness.Dial(t, n.RayletAddress).NodeManager.GetNodeStats(context.Background(), &pb.GetNodeStatsRequest{})
	if err != nil || !stats.Node.IsDraining {
		t.Fatalf("raylet does not know it is draining: %v %v", stats, err)
	}
	status, _, _ := c.Run("status")
	if !strings.Contains(status, "Draining: 1") {
		t.Errorf("status does not show the draining node:\n%s", status)
	}
	if _, stderr, code := c.Run("drain", "ffffffff"); code != 2 || !strings.Contains(stderr, "no such node") {
		t.Errorf("drain of an unknown node: exit %d, %q", code, stderr)
	}
}

func TestBlockingNodeKilledLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t)
	rec := c.Head.ReadRecord(t)
	c.Head.Kill()
	harness.Eventually(t, 5*time.Second, "GCS and raylet gone with their supervisor", func() error {
		for _, pid := range []int{rec.GCSPID, rec.RayletPID} {
			if harness.ProcessAlive(pid) {
				return fmt.Errorf("pid %d still running", pid)
			}
		}
		return nil
	})
}

func TestBackgroundStartThenStop(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t)
	temp := t.TempDir()
	port := harness.FreePort(t)
	env := []string{"RAYGO_TEMP_DIR=" + temp, fmt.Sprintf("RAYGO_ADDRESS=127.0.0.1:%d", port)}
	t.Cleanup(func() { harness.Run(t, bin, []string{"stop", "--force"}, env...) })
	stdout, stderr, code := harness.Run(t, bin, []string{"start", "--head", "--port", fmt.Sprint(port)}, env...)
	if code != 0 || !strings.Contains(stdout, "Session directory:") {
		t.Fatalf("start --head: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := harness.Run(t, bin, []string{"start"}, env...); code != 0 {
		t.Fatalf("start (join): exit %d: %s", code, stderr)
	}
	status, _, code := harness.Run(t, bin, []string{"status"}, env...)
	if code != 0 || !strings.Contains(status, "Alive: 2") {
		t.Fatalf("status after background start:\n%s", status)
	}
	stdout, stderr, code = harness.Run(t, bin, []string{"stop"}, env...)
	if code != 0 || !strings.Contains(stdout, "Stopped 2 raygo node(s)") {
		t.Fatalf("stop: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := harness.Run(t, bin, []string{"status"}, env...); code != 2 || !strings.Contains(stderr, fmt.Sprint(port)) {
		t.Fatalf("status after stop: exit %d, %q; want 2 naming the address", code, stderr)
	}
	stdout, _, _ = harness.Run(t, bin, []string{"stop"}, env...)
	if !strings.Contains(stdout, "No raygo nodes") {
		t.Errorf("second stop: %q", stdout)
	}
}
