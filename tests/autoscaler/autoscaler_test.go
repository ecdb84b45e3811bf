// Package autoscaler_test runs the autoscaler for real: a head started with
// --autoscaling-config (and `raygo up`), whose fake_multinode provider launches real
// `raygo start` raylet processes on loopback for pending placement groups, and
// terminates them when idle.
package autoscaler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// clusterYAML is a cluster of a 1-CPU head, 4-CPU workers and simulated 8-GPU DGX H100
// workers. Idle nodes go after idleSeconds.
func clusterYAML(name string, maxWorkers, cpuMin, idleSeconds int) string {
	return fmt.Sprintf(`cluster_name: %s
max_workers: %d
provider:
  type: fake_multinode
  raygo:
    node_types:
      cpu4: {price_per_hour: 0.2}
      gpu8: {price_per_hour: 98.0, gpu_model: dgx-h100}
head_node_type: head
available_node_types:
  head:
    node_config: {}
    resources: {CPU: 1}
  cpu4:
    node_config: {}
    resources: {CPU: 4}
    min_workers: %d
    max_workers: 4
    idle_timeout_s: %d
  gpu8:
    node_config: {}
    resources: {CPU: 16, GPU: 8}
    max_workers: 2
    idle_timeout_s: %d
`, name, maxWorkers, cpuMin, idleSeconds, idleSeconds)
}

// autoscaled is a head with the autoscaler and what the test needs to watch it.
type autoscaled struct {
	*harness.Cluster
	stateDir string
	pgs      pb.PlacementGroupServiceClient
	nodes    pb.NodeInfoServiceClient
}

// startAutoscaled starts a 1-CPU head running the autoscaler on yaml; extra are more
// `raygo start --head` flags.
func startAutoscaled(t *testing.T, yaml string, extra ...string) *autoscaled {
	t.Helper()
	c := harness.StartHead(t, append([]string{"--num-cpus", "1", "--autoscaling-config", writeYAML(t, yaml)}, extra...)...)
	return watchAutoscaled(t, c, yaml)
}

// writeYAML writes a cluster YAML and returns its path.
func writeYAML(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// watchAutoscaled is what a test needs to watch the head c running the autoscaler on
// yaml; the nodes it launched are stopped at cleanup.
func watchAutoscaled(t *testing.T, c *harness.Cluster, yaml string) *autoscaled {
	t.Helper()
	name := strings.TrimPrefix(strings.SplitN(yaml, "\n", 2)[0], "cluster_name: ")
	a := &autoscaled{Cluster: c, stateDir: filepath.Join(c.TempDir, "clusters", name)}
	// The launched nodes are their own sessions under the cluster's temp dir: stop them
	// all, whatever the test left.
	t.Cleanup(func() {
		c.Run("stop", "--temp-dir", c.TempDir, "--grace", "5s")
		a.noInstanceSurvives(t)
	})
	a.pgs = harness.DialPlacementGroups(t, c.GCSAddress)
	a.nodes = harness.Dial(t, c.GCSAddress).Nodes
	return a
}

// launched returns the alive nodes the autoscaler launched, by node type.
func (a *autoscaled) launched(t *testing.T) map[string][]*pb.NodeInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := a.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{AliveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*pb.NodeInfo{}
	for _, n := range reply.Nodes {
		if n.Labels[nodelabel.InstanceID] != "" {
			out[n.Labels[nodelabel.NodeType]] = append(out[n.Labels[nodelabel.NodeType]], n)
		}
	}
	return out
}

// instanceRecord is one row of the fake_multinode provider's instances.json.
type instanceRecord struct {
	ID        string `json:"id"`
	NodeType  string `json:"node_type"`
	RequestID string `json:"request_id"`
	PID       int    `json:"pid"`
}

func (a *autoscaled) instances(t *testing.T) []instanceRecord {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(a.stateDir, "instances.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []instanceRecord
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// create makes a detached group (no driver job to keep alive).
// noInstanceSurvives fails the test for every launched node still running (and kills it).
func (a *autoscaled) noInstanceSurvives(t *testing.T) {
	t.Helper()
	for _, inst := range a.instances(t) {
		if harness.ProcessAlive(inst.PID) {
			t.Errorf("instance %s (pid %d) still runs after raygo stop", inst.ID, inst.PID)
			_ = syscall.Kill(inst.PID, syscall.SIGKILL)
		}
	}
}

func (a *autoscaled) create(t *testing.T, strategy string, bundles ...map[string]float64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: "detached"}
	for _, b := range bundles {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: b})
	}
	reply, err := a.pgs.CreatePlacementGroup(ctx, req)
	if err != nil {
		t.Fatalf("create placement group: %v", err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

func (a *autoscaled) group(t *testing.T, id string) *pb.PlacementGroupInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := a.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
	if err != nil {
		t.Fatal(err)
	}
	return reply.PlacementGroup
}

func (a *autoscaled) remove(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: id}); err != nil {
		t.Fatal(err)
	}
}

func (a *autoscaled) waitCreated(t *testing.T, id string) *pb.PlacementGroupInfo {
	t.Helper()
	var row *pb.PlacementGroupInfo
	harness.Eventually(t, 90*time.Second, "group "+id+" CREATED", func() error {
		row = a.group(t, id)
		if row.State != pb.PlacementGroupState_CREATED {
			return fmt.Errorf("state %s (%s)", row.State, row.PendingReason)
		}
		return nil
	})
	return row
}

func gpuBundles(n int) []map[string]float64 {
	out := make([]map[string]float64, n)
	for i := range out {
		out[i] = map[string]float64{"GPU": 1}
	}
	return out
}

// TestAGangLaunchesTheNodesThatHoldItAndIdleNodesGo is the path from an empty
// cluster: a STRICT_SPREAD of 3 CPU bundles launches 3 CPU nodes in one request (never a
// GPU type); a STRICT_PACK of 8 × 1 GPU launches one 8-GPU node whose NVLink island holds
// it and becomes CREATED; once the groups are removed, the nodes are terminated after
// their idle timeout and min_workers stay.
func TestAGangLaunchesTheNodesThatHoldItAndIdleNodesGo(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("gang", 6, 0, 3))

	spread := a.create(t, "STRICT_SPREAD", map[string]float64{"CPU": 4}, map[string]float64{"CPU": 4}, map[string]float64{"CPU": 4})
	a.waitCreated(t, spread)
	launched := a.launched(t)
	if len(launched["cpu4"]) != 3 || len(launched["gpu8"]) != 0 {
		t.Fatalf("launched cpu4 %d, gpu8 %d; want 3 and 0 (CPU demand never launches a GPU type)", len(launched["cpu4"]), len(launched["gpu8"]))
	}
	requests := map[string]int{}
	for _, inst := range a.instances(t) {
		requests[inst.RequestID]++
	}
	if len(requests) != 1 {
		t.Fatalf("the 3 cpu4 nodes came from launch requests %v; want one request (one tick)", requests)
	}

	pack := a.create(t, "STRICT_PACK", gpuBundles(8)...)
	row := a.waitCreated(t, pack)
	gpuNodes := a.launched(t)["gpu8"]
	if len(gpuNodes) != 1 {
		t.Fatalf("gpu8 nodes = %d, want 1", len(gpuNodes))
	}
	for _, b := range row.Bundles {
		if b.NodeId != gpuNodes[0].NodeId {
			t.Fatalf("bundle %d on %s, want the launched gpu8 node %s", b.BundleIndex, b.NodeId, gpuNodes[0].NodeId)
		}
	}
	if n := len(a.launched(t)["cpu4"]); n != 3 {
		t.Fatalf("cpu4 nodes = %d after the GPU gang, want still 3", n)
	}

	a.remove(t, pack)
	a.remove(t, spread)
	harness.Eventually(t, 60*time.Second, "idle nodes terminated", func() error {
		if n := len(a.instances(t)); n != 0 {
			return fmt.Errorf("%d instances left", n)
		}
		if got := a.launched(t); len(got) != 0 {
			return fmt.Errorf("alive launched nodes: %d types", len(got))
		}
		return nil
	})
}

// TestSetupCommandsRunBeforeTheNodeJoins: a fake_multinode node runs the YAML's
// setup_commands, then worker_setup_commands, before its raylet starts: the file they
// write is complete when the node is first seen alive in the GCS, and the node's log
// echoes them. The head, started by raygo start and not raygo up, runs none.
func TestSetupCommandsRunBeforeTheNodeJoins(t *testing.T) {
	file := filepath.Join(t.TempDir(), "setup")
	a := startAutoscaled(t, clusterYAML("setup", 4, 1, 60)+fmt.Sprintf(`setup_commands:
  - echo common >> '%[1]s'
head_setup_commands:
  - echo head >> '%[1]s'
worker_setup_commands:
  - echo worker >> '%[1]s'
`, file))
	var nodes []*pb.NodeInfo
	harness.Eventually(t, 60*time.Second, "the min_workers node alive", func() error {
		if nodes = a.launched(t)["cpu4"]; len(nodes) != 1 {
			return fmt.Errorf("cpu4 nodes %d, want 1", len(nodes))
		}
		return nil
	})
	raw, err := os.ReadFile(file)
	if err != nil || string(raw) != "common\nworker\n" {
		t.Fatalf("the setup commands wrote %q (%v); want common then worker", raw, err)
	}
	id := nodes[0].Labels[nodelabel.InstanceID]
	log, err := os.ReadFile(filepath.Join(a.stateDir, "logs", id+".out"))
	if err != nil || !strings.Contains(string(log), "+ echo worker") {
		t.Fatalf("the node's log does not echo its setup commands (%v):\n%s", err, log)
	}
}

// TestAFailingSetupCommandFailsTheInstance: a worker whose setup command fails never
// starts a raylet; its process ends and raygo status lists the failure.
func TestAFailingSetupCommandFailsTheInstance(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("setupfail", 4, 1, 60)+`worker_setup_commands:
  - echo installing; exit 7
`)
	harness.Eventually(t, 60*time.Second, "status lists the failed cpu4 instance", func() error {
		out, _, code := a.Run("status")
		if code != 0 {
			return fmt.Errorf("status exit %d", code)
		}
		_, failures, _ := strings.Cut(out, "Recent failures (why):\n cpu4: ")
		if failures == "" {
			return fmt.Errorf("no cpu4 failure in status:\n%s", out)
		}
		t.Logf("status: cpu4: %s", strings.SplitN(failures, "\n", 2)[0])
		return nil
	})
	if got := a.launched(t); len(got) != 0 {
		t.Fatalf("a node whose setup failed joined: %d types", len(got))
	}
	// The instance is gone from the provider's table; its log stays.
	entries, _ := os.ReadDir(filepath.Join(a.stateDir, "logs"))
	for _, e := range entries {
		log, _ := os.ReadFile(filepath.Join(a.stateDir, "logs", e.Name()))
		if strings.Contains(string(log), "a setup command failed (exit status 7)") {
			return
		}
	}
	t.Fatal("no node log says its setup command failed with status 7")
}

// TestAnInfeasibleGangLaunchesNothingAndStatusNamesIt: a 16-GPU STRICT_PACK when the
// largest NVLink island of any type is 8.
func TestAnInfeasibleGangLaunchesNothingAndStatusNamesIt(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("infeasible", 6, 0, 60))
	id := a.create(t, "STRICT_PACK", gpuBundles(16)...)
	harness.Eventually(t, 30*time.Second, "status names the group infeasible", func() error {
		out, _, code := a.Run("status")
		if code != 0 {
			return fmt.Errorf("status exit %d", code)
		}
		if !strings.Contains(out, id) || !strings.Contains(strings.ToLower(out), "infeasible") {
			return fmt.Errorf("status does not name %s infeasible:\n%s", id, out)
		}
		return nil
	})
	if got := a.instances(t); len(got) != 0 {
		t.Fatalf("instances launched for an infeasible gang: %+v", got)
	}
}

// TestMinWorkersAreKeptAndTheGlobalMaxWorkersHoldsAGangBack: min_workers of cpu4 come up
// with the head and stay idle past their timeout; a STRICT_SPREAD of 3 × 4 CPU that
// would need max_workers 3 when the cluster allows 2 launches nothing (all or nothing).
func TestMinWorkersAreKeptAndTheGlobalMaxWorkersHoldsAGangBack(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("limits", 2, 1, 2))
	harness.Eventually(t, 60*time.Second, "min_workers up", func() error {
		if n := len(a.launched(t)["cpu4"]); n != 1 {
			return fmt.Errorf("cpu4 nodes %d, want 1", n)
		}
		return nil
	})
	id := a.create(t, "STRICT_SPREAD", map[string]float64{"CPU": 4}, map[string]float64{"CPU": 4}, map[string]float64{"CPU": 4})
	// Several ticks and idle timeouts pass: the min_workers node stays, the gang waits,
	// nothing more is launched.
	time.Sleep(5 * time.Second)
	if n := len(a.instances(t)); n != 1 {
		t.Fatalf("instances = %d, want 1 (the min_workers node; the gang needs 3 nodes and max_workers is 2)", n)
	}
	if row := a.group(t, id); row.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("group state %s, want PENDING", row.State)
	}
}

// TestUpAndDown: `raygo up` runs the head's setup commands, starts the head and waits
// for min_workers (which run theirs); `raygo down` leaves no process of the cluster
// running.
func TestUpAndDown(t *testing.T) {
	bin := harness.Binary(t)
	dir := t.TempDir()
	temp := filepath.Join(dir, "temp")
	path := filepath.Join(dir, "cluster.yaml")
	setupFile := filepath.Join(dir, "setup")
	yaml := clusterYAML("updown", 4, 2, 60) + fmt.Sprintf(`setup_commands:
  - echo common >> '%[1]s'
head_setup_commands:
  - echo head >> '%[1]s'
`, setupFile)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(harness.FreePort(t))
	t.Cleanup(func() { harness.Run(t, bin, []string{"stop", "--temp-dir", temp, "--grace", "5s"}) })
	out, errOut, code := harness.Run(t, bin, []string{"up", path, "--yes", "--port", port, "--temp-dir", temp})
	if code != 0 {
		t.Fatalf("up: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "cpu4 2/2") {
		t.Fatalf("up did not report min_workers up:\n%s", out)
	}
	// The head's commands first (before it started), then each worker's.
	if raw, err := os.ReadFile(setupFile); err != nil || string(raw) != "common\nhead\ncommon\ncommon\n" {
		t.Fatalf("setup commands wrote %q (%v); want the head's common and head, then common for each of 2 workers", raw, err)
	}
	raw, err := os.ReadFile(filepath.Join(temp, "clusters", "updown", "instances.json"))
	if err != nil {
		t.Fatal(err)
	}
	var instances []instanceRecord
	if err := json.Unmarshal(raw, &instances); err != nil || len(instances) != 2 {
		t.Fatalf("instances.json: %v, %d instances; want 2", err, len(instances))
	}
	out, errOut, code = harness.Run(t, bin, []string{"down", path, "--yes", "--port", port, "--temp-dir", temp})
	if code != 0 {
		t.Fatalf("down: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, inst := range instances {
		if harness.ProcessAlive(inst.PID) {
			t.Errorf("instance %s (pid %d) still runs after down", inst.ID, inst.PID)
		}
	}
	out, _, _ = harness.Run(t, bin, []string{"stop", "--temp-dir", temp})
	if !strings.Contains(out, "No raygo nodes are running") {
		t.Fatalf("nodes still running after down:\n%s", out)
	}
	conn, err := rpcutil.Dial("127.0.0.1:"+port, rpcutil.DialOptions{})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := pb.NewNodeInfoServiceClient(conn).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{}); err == nil {
			t.Error("the head's GCS still answers after down")
		}
		conn.Close()
	}
}

// TestUpStopsWhenAHeadSetupCommandFails: nothing starts, and up says why.
func TestUpStopsWhenAHeadSetupCommandFails(t *testing.T) {
	bin := harness.Binary(t)
	dir := t.TempDir()
	temp := filepath.Join(dir, "temp")
	path := filepath.Join(dir, "cluster.yaml")
	yaml := clusterYAML("headfail", 4, 1, 60) + "head_setup_commands:\n  - exit 4\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(harness.FreePort(t))
	t.Cleanup(func() { harness.Run(t, bin, []string{"stop", "--temp-dir", temp, "--grace", "5s"}) })
	out, errOut, code := harness.Run(t, bin, []string{"up", path, "--yes", "--port", port, "--temp-dir", temp})
	if code == 0 || !strings.Contains(errOut, "the head's setup commands: exit status 4") {
		t.Fatalf("up: exit %d\n%s\n%s; want a failure naming the head's setup commands", code, out, errOut)
	}
	if out, _, _ := harness.Run(t, bin, []string{"stop", "--temp-dir", temp}); !strings.Contains(out, "No raygo nodes are running") {
		t.Fatalf("nodes started after the head's setup failed:\n%s", out)
	}
}

// TestABadClusterYAMLStartsNothing: each problem is one line with its field path, exit 2.
func TestABadClusterYAMLStartsNothing(t *testing.T) {
	bin := harness.Binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	bad := strings.Replace(clusterYAML("bad", 4, 0, 60), "resources: {CPU: 16, GPU: 8}", "resources: {CPU: 16, GPU: -1}\n    colour: blue", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, "temp")
	_, errOut, code := harness.Run(t, bin, []string{"up", path, "--yes", "--port", strconv.Itoa(harness.FreePort(t)), "--temp-dir", temp})
	if code != 2 {
		t.Fatalf("up with a bad YAML: exit %d, want 2\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	wantFields := []string{"available_node_types.gpu8.colour", "available_node_types.gpu8.resources.GPU"}
	for _, field := range wantFields {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, field+":") }) {
			t.Errorf("no line names %s:\n%s", field, errOut)
		}
	}
	if len(lines) != len(wantFields) {
		t.Errorf("%d lines, want one per problem (%d):\n%s", len(lines), len(wantFields), errOut)
	}
	if _, err := os.Stat(filepath.Join(temp, "session_latest")); err == nil {
		t.Error("a session was started for a bad YAML")
	}
}

// TestRequestResourcesLaunchesForItsBundlesAndAClearLetsThemGo: request_resources of
// three 4-CPU bundles launches for what the cluster's totals lack (the min_workers node
// counts toward it); an empty call clears it and the extra nodes go when idle, the
// min_workers node stays.
func TestRequestResourcesLaunchesForItsBundlesAndAClearLetsThemGo(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("request", 6, 1, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: a.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	harness.Eventually(t, 60*time.Second, "min_workers up", func() error {
		if n := len(a.launched(t)["cpu4"]); n != 1 {
			return fmt.Errorf("cpu4 nodes %d, want 1", n)
		}
		return nil
	})
	four := sdk.Bundle{"CPU": 4}
	if err := client.RequestResources(ctx, sdk.ResourceRequest{Bundles: []sdk.Bundle{four, four, four}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, "three cpu4 nodes", func() error {
		if n := len(a.launched(t)["cpu4"]); n != 3 {
			return fmt.Errorf("cpu4 nodes %d, want 3", n)
		}
		return nil
	})
	// Idle past their timeout, the nodes stay while the request holds them.
	time.Sleep(4 * time.Second)
	if n := len(a.launched(t)["cpu4"]); n != 3 {
		t.Fatalf("cpu4 nodes %d while request_resources asks for 3, want 3", n)
	}
	if err := client.RequestResources(ctx, sdk.ResourceRequest{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, "back to min_workers", func() error {
		if n := len(a.instances(t)); n != 1 {
			return fmt.Errorf("%d instances, want 1", n)
		}
		return nil
	})
	if gpu := a.launched(t)["gpu8"]; len(gpu) != 0 {
		t.Fatalf("a GPU node was launched for CPU bundles")
	}
}

// spotMetadata is a loopback stand-in for EC2's instance metadata: no interruption
// notice until interrupt is called.
type spotMetadata struct {
	*httptest.Server
	notice atomic.Value
}

func newSpotMetadata(t *testing.T) *spotMetadata {
	t.Helper()
	m := &spotMetadata{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := m.notice.Load().(string)
		if r.URL.Path != "/latest/meta-data/spot/instance-action" || body == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(m.Close)
	return m
}

// interrupt publishes a notice whose deadline is in d.
func (m *spotMetadata) interrupt(d time.Duration) time.Time {
	deadline := time.Now().Add(d).UTC().Truncate(time.Second)
	m.notice.Store(fmt.Sprintf(`{"action": "terminate", "time": %q}`, deadline.Format(time.RFC3339)))
	return deadline
}

// TestASpotInterruptionMovesTheGroupToAReplacementBeforeTheDeadline: a spot node holding
// a group gets an interruption notice two minutes ahead; it drains itself with reason
// PREEMPTION, the GCS moves the group's bundle at once, and the autoscaler launches the
// replacement it lands on, before the deadline, while the spot node still runs.
func TestASpotInterruptionMovesTheGroupToAReplacementBeforeTheDeadline(t *testing.T) {
	a := startAutoscaled(t, clusterYAML("spot", 6, 0, 600))
	metadata := newSpotMetadata(t)
	spot := a.AddNode("--num-cpus", "4", "--spot-metadata-url", metadata.URL, "--labels", "market=spot")
	id := a.create(t, "PACK", map[string]float64{"CPU": 4})
	if row := a.waitCreated(t, id); row.Bundles[0].NodeId != spot.NodeID {
		t.Fatalf("the group went to %s, want the spot node %s", row.Bundles[0].NodeId, spot.NodeID)
	}
	deadline := metadata.interrupt(2 * time.Minute)
	harness.Eventually(t, 90*time.Second, "the group on a replacement node", func() error {
		row := a.group(t, id)
		if row.State != pb.PlacementGroupState_CREATED || row.Bundles[0].NodeId == spot.NodeID {
			return fmt.Errorf("state %s on %s", row.State, row.Bundles[0].NodeId)
		}
		return nil
	})
	if time.Now().After(deadline) {
		t.Fatalf("the group moved after the deadline %s", deadline)
	}
	row := a.group(t, id)
	var moved *pb.NodeInfo
	for _, nodes := range a.launched(t) {
		for _, n := range nodes {
			if n.NodeId == row.Bundles[0].NodeId {
				moved = n
			}
		}
	}
	if moved == nil {
		t.Fatalf("the group's new node %s is not one the autoscaler launched", row.Bundles[0].NodeId)
	}
	nodes, err := a.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	if n := harness.FindNode(nodes, spot.NodeID); n == nil || n.State != pb.NodeState_ALIVE || !n.IsDraining {
		t.Fatalf("the spot node is %v, want ALIVE and draining until its deadline", n)
	}
}
