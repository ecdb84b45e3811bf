package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/poll"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// cohortReclaimQueues: research borrows prod's idle GPUs; prod takes them back.
const cohortReclaimQueues = `cohorts:
  - name: ml
queues:
  - name: research
    cohort: ml
    namespaces: ["research"]
    resources:
      GPU: {nominalQuota: 8, borrowingLimit: 8}
  - name: prod
    cohort: ml
    namespaces: ["prod"]
    resources:
      GPU: {nominalQuota: 16, borrowingLimit: 0}
    preemption:
      reclaimWithinCohort: Any
`

// The reclaim on real processes with a Go hook: 3 simulated DGX H100 nodes;
// research runs three 4-GPU groups (4 GPUs borrowed); prod's first 8-GPU group at
// training-high is admitted at once, its second reclaims research's last-admitted group
// that is alone on a node (InCohortReclamation), whose OnPreemption hook runs while its
// bundles are held; the group waits (Preempted) and runs again once prod's groups are
// removed.
func TestAReclaimRunsTheVictimsGoHookBeforeReleasingIt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte(cohortReclaimQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "4", "--queues", file)
	for range 3 {
		c.AddNode("--gpu-sim", "dgx-h100")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: "research"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	waitForGPUs(t, c, 24)
	gpus := func(n int) []sdk.Bundle {
		out := make([]sdk.Bundle, n)
		for i := range out {
			out[i] = sdk.Bundle{"GPU": 1}
		}
		return out
	}
	var research []*sdk.PlacementGroup
	for range 3 {
		pg, err := client.CreatePlacementGroup(ctx, gpus(4), sdk.Pack, sdk.WithPriority("training"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pg.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		research = append(research, pg)
	}
	c.CheckInvariants("research runs three groups")
	type hooked struct {
		notice sdk.PreemptionNotice
		row    *sdk.PlacementGroupInfo
	}
	calls := make(chan hooked, 4)
	for _, pg := range research {
		stop := pg.OnPreemption(func(ctx context.Context, notice sdk.PreemptionNotice) error {
			row, err := pg.Table(ctx)
			if err != nil {
				return err
			}
			calls <- hooked{notice, row}
			return nil
		})
		defer stop()
	}
	prod := func() *sdk.PlacementGroup {
		pg, err := client.CreatePlacementGroup(ctx, gpus(8), sdk.Pack, sdk.WithQueue("prod"), sdk.WithPriority("training-high"))
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}
	first := prod()
	if _, err := first.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	c.CheckInvariants("prod's first group runs")
	victim, placed := reclaimVictim(ctx, t, first, research)
	t.Logf("groups by node: %v; the victim should be %s", placed, victim.ID)
	second := prod()
	var call hooked
	select {
	case call = <-calls:
	case <-time.After(30 * time.Second):
		row, _ := second.Table(ctx)
		t.Fatalf("no hook ran; the preemptor: %+v", row)
	}
	if call.row.ID != victim.ID || call.notice.Reason != "InCohortReclamation" || call.notice.PreemptorID != second.ID {
		t.Fatalf("hook of %s with %+v; want %s's, InCohortReclamation by %s (groups by node: %v)", call.row.ID, call.notice, victim.ID, second.ID, placed)
	}
	if call.row.State != "CREATED" || call.row.Bundles[0].NodeID == "" || call.row.Preemptions != 1 {
		t.Fatalf("during the hook the victim's row is %s (bundle 0 on %q, %d preemptions): want CREATED, still placed", call.row.State,
			call.row.Bundles[0].NodeID, call.row.Preemptions)
	}
	if _, err := second.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	row, err := victim.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != "PENDING" || row.PendingReasonCode != "Preempted" || !row.LastPreemption.Acknowledged {
		t.Fatalf("victim after the preemptor runs: %s %q %+v", row.State, row.PendingReasonCode, row.LastPreemption)
	}
	select {
	case other := <-calls:
		t.Fatalf("another group was preempted: %+v", other.row.ID)
	default:
	}
	c.CheckInvariants("the victim is queued, prod's groups run")
	for _, pg := range []*sdk.PlacementGroup{first, second} {
		if err := pg.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := victim.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	c.CheckInvariants("the victim runs again")
}

// reclaimVictim is the group a reclaim for a second 8-GPU group should evict: research's
// last-admitted group alone on a node (the one eviction that frees a whole node), given
// where the groups went; placed says which groups each node holds, for messages.
func reclaimVictim(ctx context.Context, t *testing.T, first *sdk.PlacementGroup, research []*sdk.PlacementGroup) (*sdk.PlacementGroup, map[string][]string) {
	t.Helper()
	nodeOf := map[string]string{}
	placed := map[string][]string{}
	for _, pg := range append([]*sdk.PlacementGroup{first}, research...) {
		row, err := pg.Table(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range row.Bundles {
			if nodeOf[pg.ID] == "" {
				placed[b.NodeID] = append(placed[b.NodeID], pg.ID)
			} else if nodeOf[pg.ID] != b.NodeID {
				t.Fatalf("group %s is on nodes %s and %s; every group here fits one node", pg.ID, nodeOf[pg.ID], b.NodeID)
			}
			nodeOf[pg.ID] = b.NodeID
		}
	}
	for i := len(research) - 1; i >= 0; i-- {
		if len(placed[nodeOf[research[i].ID]]) == 1 {
			return research[i], placed
		}
	}
	t.Fatalf("no research group is alone on a node: groups by node %v", placed)
	return nil, nil
}

// inferenceQueues: serve evicts its own lower-priority work; other is a queue of its own
// (no cohort). The shipped classes get a 1 s grace period, and pinned is a
// non-preemptible class below training.
const inferenceQueues = `queues:
  - name: serve
    namespaces: ["serve"]
    resources:
      GPU: {nominalQuota: 8}
    preemption:
      withinClusterQueue: LowerPriority
  - name: other
    namespaces: ["other"]
    resources:
      GPU: {nominalQuota: 8}
priorityClasses:
  - {name: production-inference, value: 10000, gracePeriod: 1s}
  - {name: training, value: 500, gracePeriod: 1s}
  - {name: development, value: 100, gracePeriod: 1s}
  - {name: pinned, value: 50, preemptible: false}
`

// The inference case on real processes, two simulated DGX H100 nodes, both
// full: serve runs training (4 GPUs), development (2) and pinned (2, non-preemptible);
// other runs a development group of 8. A production-inference group of 2 evicts exactly
// serve's development group (the minimal set of the lowest priority, never other's
// work); a second of 4 evicts the training group; a third of 2 evicts nothing: what is
// left is non-preemptible or of equal priority. Invariants hold after every step.
func TestInferencePreemptsTheLowestTrainingOfItsQueueOnlyAndNeverPinnedOrEqualWork(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte(inferenceQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "4", "--queues", file)
	c.AddNode("--gpu-sim", "dgx-h100")
	c.AddNode("--gpu-sim", "dgx-h100")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func(namespace string) *sdk.Client {
		client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress, Namespace: namespace})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		return client
	}
	serve, other := connect("serve"), connect("other")
	waitForGPUs(t, c, 16)
	create := func(client *sdk.Client, priority string, n int) *sdk.PlacementGroup {
		t.Helper()
		bundles := make([]sdk.Bundle, n)
		for i := range bundles {
			bundles[i] = sdk.Bundle{"GPU": 1}
		}
		pg, err := client.CreatePlacementGroup(ctx, bundles, sdk.Pack, sdk.WithPriority(priority))
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}
	running := func(client *sdk.Client, priority string, n int) *sdk.PlacementGroup {
		t.Helper()
		pg := create(client, priority, n)
		if _, err := pg.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		return pg
	}
	row := func(pg *sdk.PlacementGroup) *sdk.PlacementGroupInfo {
		t.Helper()
		info, err := pg.Table(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	otherDev := running(other, "development", 8)
	training := running(serve, "training", 4)
	dev := running(serve, "development", 2)
	pinned := running(serve, "pinned", 2)
	c.CheckInvariants("both nodes full")

	// noticed reports which groups got a notice so far, and checks it came from by.
	groups := map[string]*sdk.PlacementGroup{"other's development": otherDev, "training": training, "serve's development": dev, "pinned": pinned}
	noticed := func() map[string]string {
		out := map[string]string{}
		for name, pg := range groups {
			if n := row(pg).LastPreemption; n != nil {
				out[name] = n.Reason + " by " + n.PreemptorID
			}
		}
		return out
	}

	first := create(serve, "production-inference", 2)
	if _, err := first.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := noticed(), map[string]string{"serve's development": "InClusterQueue by " + first.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the first inference group: notices %v, want %v", got, want)
	}
	c.CheckInvariants("the first inference group runs")

	second := create(serve, "production-inference", 4)
	if _, err := second.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := noticed(), map[string]string{"serve's development": "InClusterQueue by " + first.ID, "training": "InClusterQueue by " + second.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the second inference group: notices %v, want %v", got, want)
	}
	c.CheckInvariants("the second inference group runs")

	// Left in serve: pinned (non-preemptible) and two groups of equal priority.
	third := create(serve, "production-inference", 2)
	poll.Until(t, 30*time.Second, 50*time.Millisecond, "the third inference group decided", func() error {
		if info := row(third); info.PendingReasonCode != "QuotaExceeded" {
			return fmt.Errorf("%s %q", info.State, info.PendingReasonCode)
		}
		return nil
	})
	// Its preemption decision follows admission in the same round; a group of other's
	// (held by its quota) that admission records afterwards shows that round ended.
	marker := create(other, "development", 1)
	poll.Until(t, 30*time.Second, 50*time.Millisecond, "a later round", func() error {
		if info := row(marker); info.PendingReasonCode != "QuotaExceeded" {
			return fmt.Errorf("%s %q", info.State, info.PendingReasonCode)
		}
		return nil
	})
	if got := noticed(); len(got) != 2 {
		t.Fatalf("the third inference group evicted something: notices %v", got)
	}
	for _, pg := range []*sdk.PlacementGroup{first, second, pinned} {
		if info := row(pg); info.State != "CREATED" || info.Preemptions != 0 {
			t.Fatalf("group %s: %s with %d notices, want CREATED and never noticed", pg.ID, info.State, info.Preemptions)
		}
	}
	for name, pg := range map[string]*sdk.PlacementGroup{"serve's development": dev, "training": training} {
		if info := row(pg); info.State != "PENDING" || info.PendingReasonCode != "Preempted" {
			t.Fatalf("%s: %s %q, want PENDING Preempted", name, info.State, info.PendingReasonCode)
		}
	}
	if info := row(otherDev); info.State != "CREATED" {
		t.Fatalf("other's development group: %s, want CREATED", info.State)
	}
	c.CheckInvariants("the third inference group waits")
}

// waitForGPUs waits until the cluster's nodes offer n GPUs in all.
func waitForGPUs(t *testing.T, c *harness.Cluster, n float64) {
	t.Helper()
	poll.Until(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("%g GPUs", n), func() error {
		nodes, err := c.Nodes()
		if err != nil {
			return err
		}
		gpus := 0.0
		for _, node := range nodes {
			gpus += node.ResourcesTotal["GPU"]
		}
		if gpus != n {
			return fmt.Errorf("%g GPUs", gpus)
		}
		return nil
	})
}
