package reconciler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/autoscaler"
	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func gpuType() autoscaler.NodeType {
	return autoscaler.NodeType{
		Name: "gpu8", Resources: resources.Set{"CPU": 96 * resources.AmountScale, "GPU": 8 * resources.AmountScale},
		GPUModel: "dgx-h100", GPUIslands: []int{8}, PricePerHour: 98, MaxWorkers: 4, IdleTimeout: time.Minute,
	}
}

func strictPack8() autoscaler.GroupDemand {
	bundles := make([]resources.Set, 8)
	for i := range bundles {
		bundles[i] = resources.Set{"GPU": resources.AmountScale}
	}
	return autoscaler.GroupDemand{ID: "pg1", Request: placement.Request{Bundles: bundles, Strategy: placement.StrategyStrictPack}, Reason: pending.Infeasible}
}

func newTestReconciler(t *testing.T) (*Reconciler, *FakeCluster, *provider.Memory, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cluster := NewFakeCluster()
	mem := provider.NewMemory(c.now)
	r := New(Config{Types: []autoscaler.NodeType{gpuType()}, MaxWorkers: 10, UpscalingSpeed: 1, Now: c.now}, cluster, mem)
	return r, cluster, mem, c
}

func tick(t *testing.T, r *Reconciler) {
	t.Helper()
	if err := r.Tick(context.Background()); err != nil {
		t.Fatalf("tick: %v", err)
	}
}

// runningNode is the GCS's row of a node an instance became.
func runningNode(nodeID, instanceID, nodeType string, idle time.Duration) autoscaler.Node {
	nt := gpuType()
	labels := map[string]string{nodelabel.NodeID: nodeID, nodelabel.InstanceID: instanceID, nodelabel.NodeType: nodeType}
	gpus := make([]placement.GPU, 8)
	for i := range gpus {
		gpus[i] = placement.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", nodeID, i), NVLinkIsland: 0, Rail: i, Available: resources.AmountScale}
	}
	return autoscaler.Node{ID: nodeID, Type: nodeType, State: autoscaler.NodeRunning, IdleFor: idle,
		Placement: placement.Node{ID: placement.NodeID(nodeID), Total: nt.Resources, Available: nt.Resources, Labels: labels, Alive: true, GPUs: gpus}}
}

func states(r *Reconciler) []State {
	var out []State
	for _, inst := range r.Instances() {
		out = append(out, inst.State)
	}
	return out
}

func TestAPendingGroupLaunchesOneNodeAndItRunsOnceItsRayletRegisters(t *testing.T) {
	r, cluster, mem, _ := newTestReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	if got := mem.Launches("gpu8"); got != 1 {
		t.Fatalf("launch calls = %d, want 1", got)
	}
	if got := cluster.Last.Launched["gpu8"]; got != 1 {
		t.Fatalf("reported launched gpu8 instances = %d, want 1", got)
	}
	insts := r.Instances()
	if len(insts) != 1 || insts[0].State != Allocated {
		t.Fatalf("instances = %+v, want one ALLOCATED", insts)
	}
	// The same demand on the next tick, node not registered yet: no second launch.
	tick(t, r)
	if got := mem.Launches("gpu8"); got != 1 {
		t.Fatalf("launch calls after a second tick = %d, want still 1 (the node is launching)", got)
	}
	cluster.Set(Observation{Nodes: []autoscaler.Node{runningNode("n1", insts[0].ID, "gpu8", 0)}})
	tick(t, r)
	if got := r.Instances()[0]; got.State != RayRunning || got.NodeID != "n1" {
		t.Fatalf("instance = %+v, want RAY_RUNNING on n1", got)
	}
}

func TestAFailedLaunchIsShownAndTheTypeBacksOff(t *testing.T) {
	r, cluster, mem, c := newTestReconciler(t)
	mem.Fail("gpu8", fmt.Errorf("InsufficientInstanceCapacity: %w", provider.ErrCapacity))
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	if len(cluster.Last.Failures) != 1 || cluster.Last.Failures[0].State != AllocationFailed {
		t.Fatalf("failures = %+v, want one ALLOCATION_FAILED", cluster.Last.Failures)
	}
	tick(t, r)
	if got := mem.Launches("gpu8"); got != 1 {
		t.Fatalf("launch calls during the backoff = %d, want 1", got)
	}
	mem.Fail("gpu8", nil)
	c.advance(6 * time.Second)
	tick(t, r)
	if got := mem.Launches("gpu8"); got != 1 {
		t.Fatalf("launch calls 6 s after a capacity error = %d, want 1 (backed off for %s)", got, CapacityBackoff)
	}
	c.advance(CapacityBackoff)
	tick(t, r)
	if got := mem.Launches("gpu8"); got != 2 {
		t.Fatalf("launch calls after the backoff = %d, want 2", got)
	}
	live := 0
	for _, inst := range r.Instances() {
		if inst.live() {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("live instances = %d (%v), want 1", live, states(r))
	}
}

func TestANodeWhoseRayletNeverRegistersIsTerminatedAsRayInstallFailed(t *testing.T) {
	r, cluster, mem, c := newTestReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	c.advance(DefaultTimeouts().Allocated + time.Second)
	cluster.Set(Observation{})
	tick(t, r)
	if got := states(r); len(got) < 1 || got[0] != Terminating {
		t.Fatalf("states = %v, want the instance TERMINATING", got)
	}
	if left, _ := mem.Instances(context.Background()); len(left) != 0 {
		t.Fatalf("provider still has %d instances", len(left))
	}
	if len(cluster.Last.Failures) != 1 || cluster.Last.Failures[0].State != RayInstallFailed {
		t.Fatalf("failures = %+v, want RAY_INSTALL_FAILED", cluster.Last.Failures)
	}
	tick(t, r)
	if got := states(r); got[0] != Terminated {
		t.Fatalf("states = %v, want TERMINATED once the provider no longer lists it", got)
	}
}

func TestAnIdleNodeIsDrainedThenTerminatedUnlessTheGCSRefuses(t *testing.T) {
	r, cluster, mem, _ := newTestReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	id := r.Instances()[0].ID
	// Work landed between plan and drain: the GCS refuses, the node stays.
	cluster.Busy["n1"] = true
	cluster.Set(Observation{Nodes: []autoscaler.Node{runningNode("n1", id, "gpu8", 2*time.Minute)}})
	tick(t, r)
	tick(t, r)
	if got := r.Instances()[0].State; got != RayRunning {
		t.Fatalf("state = %s, want RAY_RUNNING (drain refused)", got)
	}
	if left, _ := mem.Instances(context.Background()); len(left) != 1 {
		t.Fatalf("provider has %d instances, want 1", len(left))
	}
	delete(cluster.Busy, "n1")
	tick(t, r)
	if _, ok := cluster.Drained["n1"]; !ok {
		t.Fatal("the idle node was not drained")
	}
	if got := r.Instances()[0].State; got != Terminating {
		t.Fatalf("state = %s, want TERMINATING", got)
	}
	if left, _ := mem.Instances(context.Background()); len(left) != 0 {
		t.Fatalf("provider has %d instances, want 0", len(left))
	}
}

func TestARestartedReconcilerAdoptsTheProvidersInstances(t *testing.T) {
	r, cluster, mem, c := newTestReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	id := r.Instances()[0].ID
	cluster.Set(Observation{Nodes: []autoscaler.Node{runningNode("n1", id, "gpu8", 0)}, Groups: []autoscaler.GroupDemand{}})
	again := New(Config{Types: []autoscaler.NodeType{gpuType()}, MaxWorkers: 10, Now: c.now}, cluster, mem)
	tick(t, again)
	insts := again.Instances()
	if len(insts) != 1 || insts[0].ID != id || insts[0].State != RayRunning {
		t.Fatalf("instances = %+v, want %s adopted as RAY_RUNNING", insts, id)
	}
	if got := mem.Launches("gpu8"); got != 1 {
		t.Fatalf("launch calls = %d, want 1 (nothing launched twice)", got)
	}
}

func TestADeadRayletsMachineIsTerminated(t *testing.T) {
	r, cluster, mem, _ := newTestReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{strictPack8()}})
	tick(t, r)
	id := r.Instances()[0].ID
	cluster.Set(Observation{Nodes: []autoscaler.Node{runningNode("n1", id, "gpu8", 0)}})
	tick(t, r)
	cluster.Set(Observation{DeadInstances: []string{id}})
	tick(t, r)
	if got := r.Instances()[0].State; got != Terminating {
		t.Fatalf("state = %s, want TERMINATING", got)
	}
	if left, _ := mem.Instances(context.Background()); len(left) != 0 {
		t.Fatalf("provider has %d instances, want 0", len(left))
	}
}

func TestAdvanceTimesOutARequestedInstance(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	insts := []Instance{{ID: "i1", State: Requested, Since: now.Add(-11 * time.Minute)}, {ID: "i2", State: Requested, Since: now.Add(-time.Minute)}}
	got := advance(insts, map[string]provider.Instance{}, map[string]nodeView{}, now, DefaultTimeouts())
	if len(got) != 1 || got[0].Index != 0 || got[0].To != AllocationTimeout {
		t.Fatalf("transitions = %+v, want i1 ALLOCATION_TIMEOUT only", got)
	}
}

func cpuType(name string, price float64, labels map[string]string) autoscaler.NodeType {
	return autoscaler.NodeType{Name: name, Resources: resources.Set{"CPU": 4 * resources.AmountScale}, Labels: labels,
		PricePerHour: price, MaxWorkers: 8, IdleTimeout: time.Minute}
}

// spreadGang is a STRICT_SPREAD of four 4-CPU bundles, three on hdd nodes and the last
// on an ssd node: two node types, two launches.
func spreadGang() autoscaler.GroupDemand {
	four := resources.Set{"CPU": 4 * resources.AmountScale}
	ssd, err := nodelabel.ParseSelector(map[string]string{"disk": "ssd"})
	if err != nil {
		panic(err)
	}
	hdd, err := nodelabel.ParseSelector(map[string]string{"disk": "hdd"})
	if err != nil {
		panic(err)
	}
	return autoscaler.GroupDemand{ID: "gang1", Reason: pending.NoResources, Request: placement.Request{
		Bundles: []resources.Set{four, four, four, four}, Strategy: placement.StrategyStrictSpread,
		BundleLabelSelectors: []nodelabel.Selector{hdd, hdd, hdd, ssd}}}
}

func newGangReconciler(t *testing.T) (*Reconciler, *FakeCluster, *provider.Memory, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cluster := NewFakeCluster()
	mem := provider.NewMemory(c.now)
	types := []autoscaler.NodeType{cpuType("cpu4", 0.2, map[string]string{"disk": "hdd"}), cpuType("cpu4ssd", 0.3, map[string]string{"disk": "ssd"})}
	return New(Config{Types: types, MaxWorkers: 10, Now: c.now}, cluster, mem), cluster, mem, c
}

// A gang gets all its new nodes or none (karpenter#3138 pays for 3 of 4): when the
// launch of its 4th node fails, the 3 launched for it go in the same tick.
func TestAGangWhoseLastLaunchFailsKeepsNoNode(t *testing.T) {
	r, cluster, mem, _ := newGangReconciler(t)
	mem.Fail("cpu4ssd", fmt.Errorf("InsufficientInstanceCapacity: %w", provider.ErrCapacity))
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{spreadGang()}})
	tick(t, r)
	if got := mem.Launches("cpu4"); got != 1 {
		t.Fatalf("cpu4 launch calls = %d, want 1 (three nodes in one request)", got)
	}
	if left, _ := mem.Instances(context.Background()); len(left) != 0 {
		t.Fatalf("%d instances left after the gang's last launch failed, want 0", len(left))
	}
	found := false
	for _, f := range cluster.Last.Failures {
		found = found || strings.Contains(f.Detail, "placement group gang1")
	}
	if !found {
		t.Fatalf("failures %+v do not name the gang", cluster.Last.Failures)
	}
}

// An instance of a gang that does not run within its timeout fails the gang: the other
// nodes launched for it go, the running ones through an idle drain.
func TestAGangMemberThatNeverRunsTakesTheOthersDown(t *testing.T) {
	r, cluster, mem, c := newGangReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{spreadGang()}})
	tick(t, r)
	insts := r.Instances()
	if len(insts) != 4 {
		t.Fatalf("instances = %d, want 4", len(insts))
	}
	// Three register; the ssd node never does.
	var nodes []autoscaler.Node
	for i, inst := range insts {
		if inst.NodeType == "cpu4" {
			n := runningNode(fmt.Sprintf("n%d", i), inst.ID, "cpu4", 0)
			n.Placement.GPUs, n.Placement.Total, n.Placement.Available = nil, cpuType("cpu4", 0, nil).Resources, cpuType("cpu4", 0, nil).Resources
			nodes = append(nodes, n)
		}
	}
	cluster.Set(Observation{Nodes: nodes, Groups: []autoscaler.GroupDemand{spreadGang()}})
	tick(t, r)
	c.advance(DefaultTimeouts().Allocated + time.Second)
	tick(t, r)
	left, _ := mem.Instances(context.Background())
	for _, inst := range left {
		for _, old := range insts {
			if inst.ID == old.ID {
				t.Fatalf("instance %s launched for the failed gang still exists: %v", inst.ID, states(r))
			}
		}
	}
	// The gang is planned again: a new launch for it.
	if len(left) != 4 {
		t.Fatalf("%d new instances, want the gang's 4 launched again", len(left))
	}
	if len(cluster.Drained) != 3 {
		t.Fatalf("drained %v, want the 3 running nodes", cluster.Drained)
	}
}

// Once every node launched for a gang runs, a later failure of one of them is not the
// gang's: the others stay.
func TestACompleteGangReleasesItsNodes(t *testing.T) {
	r, cluster, mem, _ := newGangReconciler(t)
	cluster.Set(Observation{Groups: []autoscaler.GroupDemand{spreadGang()}})
	tick(t, r)
	var nodes []autoscaler.Node
	for i, inst := range r.Instances() {
		n := runningNode(fmt.Sprintf("n%d", i), inst.ID, inst.NodeType, 0)
		n.Placement.GPUs, n.Placement.Total, n.Placement.Available = nil, cpuType("x", 0, nil).Resources, resources.Set{}
		nodes = append(nodes, n)
	}
	cluster.Set(Observation{Nodes: nodes})
	tick(t, r)
	for _, inst := range r.Instances() {
		if len(inst.Gangs) != 0 || inst.State != RayRunning {
			t.Fatalf("instance %+v, want RAY_RUNNING released from its gang", inst)
		}
	}
	cluster.Set(Observation{Nodes: nodes[1:], DeadInstances: []string{r.Instances()[0].ID}})
	tick(t, r)
	if left, _ := mem.Instances(context.Background()); len(left) != 3 {
		t.Fatalf("%d instances left, want 3 (only the dead one goes)", len(left))
	}
}
