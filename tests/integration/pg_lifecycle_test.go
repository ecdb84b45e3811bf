package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, c *harness.InProcess) *sdk.Client {
	t.Helper()
	client, err := sdk.Connect(testContext(t), sdk.Options{Address: c.GCS.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func ready(t *testing.T, pg *sdk.PlacementGroup) *sdk.PlacementGroupInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	info, err := pg.Ready(ctx)
	if err != nil {
		row, _ := pg.Table(context.Background())
		t.Fatalf("placement group %s not ready: %v (%+v)", pg.ID, err, row)
	}
	return info
}

func nodesOf(info *sdk.PlacementGroupInfo) []string {
	out := make([]string, len(info.Bundles))
	for i, b := range info.Bundles {
		out[i] = b.NodeID
	}
	return out
}

func distinct(ids []string) int {
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	return len(seen)
}

// availableCPU returns what each raylet itself says is available.
func availableCPU(c *harness.InProcess) map[string]float64 {
	out := map[string]float64{}
	for _, r := range c.Raylets {
		out[r.NodeID()] = r.Node().ResourcesAvailable["CPU"]
	}
	return out
}

func TestStrategiesPlaceAndRayletsAccount(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	for i := 0; i < 4; i++ {
		c.AddRaylet(map[string]float64{"CPU": 4}, nil)
	}
	client := connect(t, c)
	ctx := testContext(t)
	three := []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}}
	cases := []struct {
		strategy  sdk.Strategy
		bundles   []sdk.Bundle
		wantNodes int
	}{
		{sdk.Pack, three, 1},
		{sdk.StrictPack, three, 1},
		{sdk.Spread, three, 3},
		{sdk.StrictSpread, three, 3},
		{sdk.Pack, []sdk.Bundle{{"CPU": 3}, {"CPU": 3}}, 2}, // best effort: spills over
		{sdk.Spread, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, 4},
	}
	for _, tc := range cases {
		pg, err := client.CreatePlacementGroup(ctx, tc.bundles, tc.strategy)
		if err != nil {
			t.Fatal(err)
		}
		info := ready(t, pg)
		if info.State != "CREATED" || info.SchedulingState != "FINISHED" || info.EndToEndCreationLatencyMs < 0 || info.SchedulingAttempt < 1 {
			t.Errorf("%s: state %s / %s, attempts %d", tc.strategy, info.State, info.SchedulingState, info.SchedulingAttempt)
		}
		if got := distinct(nodesOf(info)); got != tc.wantNodes {
			t.Errorf("%s %v: on %d nodes %v, want %d", tc.strategy, tc.bundles, got, nodesOf(info), tc.wantNodes)
		}
		used := 0.0
		for _, b := range tc.bundles {
			used += b["CPU"]
		}
		total := 0.0
		for _, v := range availableCPU(c) {
			total += v
		}
		if total != 16-used {
			t.Errorf("%s: raylets report %v CPU available, want %v", tc.strategy, total, 16-used)
		}
		if err := pg.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		// Removal is asynchronous, as Ray's: the raylets release the bundles shortly after.
		poll.Until(t, 10*time.Second, 10*time.Millisecond, string(tc.strategy)+": every CPU free after remove", func() error {
			for node, v := range availableCPU(c) {
				if v != 4 {
					return fmt.Errorf("node %s has %v CPU available, want 4 (leak)", node, v)
				}
			}
			return nil
		})
	}
}

func TestFractionalBundlesNeverDrift(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	c.AddRaylet(map[string]float64{"CPU": 1}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	bundles := make([]sdk.Bundle, 10)
	for i := range bundles {
		bundles[i] = sdk.Bundle{"CPU": 0.1}
	}
	pg, err := client.CreatePlacementGroup(ctx, bundles, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, pg) // 10 × 0.1 must fit exactly in 1 CPU
	if got := c.Raylets[0].Node().ResourcesAvailable["CPU"]; got != 0 {
		t.Fatalf("available after 10 × 0.1 CPU = %v, want exactly 0", got)
	}
}

func TestBadInputIsRefusedWithTheFieldNamedAndNothingPersisted(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	c.AddRaylet(map[string]float64{"CPU": 4}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	if _, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack, sdk.WithName("taken")); err != nil {
		t.Fatal(err)
	}
	pgs := harness.DialPlacementGroups(t, c.GCS.Address())
	job := client.JobID()
	ok := func(resources map[string]float64) *pb.CreatePlacementGroupRequest_BundleSpec {
		return &pb.CreatePlacementGroupRequest_BundleSpec{Resources: resources}
	}
	many := make([]*pb.CreatePlacementGroupRequest_BundleSpec, 10001)
	for i := range many {
		many[i] = ok(map[string]float64{"CPU": 0.0001})
	}
	cases := []struct {
		name  string
		req   *pb.CreatePlacementGroupRequest
		field string
	}{
		{"no bundles", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job}, "bundles"},
		{"empty bundle", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 1}), ok(nil)}}, "bundles[1]"},
		{"all-zero bundle", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 0, "GPU": 0})}}, "bundles[0]"},
		{"negative amount", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"GPU": -1})}}, `bundles[0]["GPU"]`},
		{"unknown strategy", &pb.CreatePlacementGroupRequest{Strategy: "FOO", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 1})}}, "strategy"},
		{"bad lifetime", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Lifetime: "forever", Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 1})}}, "lifetime"},
		{"name taken", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Name: "taken", Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 1})}}, "name"},
		{"too many bundles", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: many}, "bundles"},
		{"empty resource name", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"": 1})}}, "bundles[0]"},
		{"long resource name", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{strings.Repeat("x", 257): 1})}}, "bundles[0]"},
		{"bad selector", &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job, Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}, LabelSelector: map[string]string{"zone": "in(a,"}}}}, "bundle_label_selector[0]"},
		{"no job", &pb.CreatePlacementGroupRequest{Strategy: "PACK", Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{ok(map[string]float64{"CPU": 1})}}, "creator_job_id"},
	}
	before := countGroups(t, pgs)
	for _, tc := range cases {
		_, err := pgs.CreatePlacementGroup(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", tc.name, err)
			continue
		}
		if !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("%s: message %q does not name %q", tc.name, status.Convert(err).Message(), tc.field)
		}
	}
	if after := countGroups(t, pgs); after != before {
		t.Fatalf("bad input changed the table: %d groups before, %d after", before, after)
	}
	// Through the SDK the same error is ErrInvalidArgument.
	if _, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": -1}}, sdk.Pack); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("SDK bad input: %v", err)
	}
}

func countGroups(t *testing.T, pgs pb.PlacementGroupServiceClient) int {
	reply, err := pgs.GetAllPlacementGroup(context.Background(), &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return len(reply.PlacementGroups)
}

func TestInfeasibleWaitsThenANewNodeServesIt(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	c.AddRaylet(map[string]float64{"CPU": 2}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 8}}, sdk.StrictPack, sdk.WithName("big"))
	if err != nil {
		t.Fatalf("a well-formed group no node can hold is not bad input: %v", err)
	}
	harness.Eventually(t, 10*time.Second, "group INFEASIBLE with a reason", func() error {
		info, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "PENDING" || info.SchedulingState != "INFEASIBLE" || !strings.Contains(info.PendingReason, "CPU") {
			return fmt.Errorf("%s / %s / %q", info.State, info.SchedulingState, info.PendingReason)
		}
		return nil
	})
	if ok, err := pg.Wait(ctx, 200*time.Millisecond); ok || err != nil {
		t.Fatalf("Wait on an infeasible group = %v, %v; want false, nil", ok, err)
	}
	big := c.AddRaylet(map[string]float64{"CPU": 8}, nil)
	info := ready(t, pg)
	if info.Bundles[0].NodeID != big.NodeID() || info.Bundles[0].NodeAddress != big.Address() {
		t.Fatalf("bundle on %s (%s), want the new node %s", info.Bundles[0].NodeID, info.Bundles[0].NodeAddress, big.NodeID())
	}
}

func TestNotNowWaitsUntilResourcesAreReleased(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	c.AddRaylet(map[string]float64{"CPU": 4}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	first, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 3}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, first)
	second, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 2}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "second group NO_RESOURCES", func() error {
		info, err := second.Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "PENDING" || info.SchedulingState != "NO_RESOURCES" {
			return fmt.Errorf("%s / %s", info.State, info.SchedulingState)
		}
		return nil
	})
	if err := first.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	ready(t, second)
}

func TestNamesRemovalAndRemovedGroupsStayListed(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	c.AddRaylet(map[string]float64{"CPU": 2}, nil)
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack, sdk.WithName("trainer"))
	if err != nil {
		t.Fatal(err)
	}
	found, err := client.GetPlacementGroup(ctx, "trainer")
	if err != nil || found.ID != pg.ID {
		t.Fatalf("lookup by name: %v, %v", found, err)
	}
	if _, err := client.GetPlacementGroup(ctx, "nobody"); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("lookup of an unknown name: %v", err)
	}
	ready(t, pg)
	for i := 0; i < 2; i++ { // idempotent
		if err := pg.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pgs := harness.DialPlacementGroups(t, c.GCS.Address())
	if _, err := pgs.RemovePlacementGroup(ctx, &pb.RemovePlacementGroupRequest{PlacementGroupId: "0123"}); err != nil {
		t.Fatalf("removing an unknown id must be a no-op: %v", err)
	}
	info, err := pg.Table(ctx)
	if err != nil || info.State != "REMOVED" || info.SchedulingState != "REMOVED" {
		t.Fatalf("removed group row: %+v, %v", info, err)
	}
	if _, err := pg.Ready(ctx); !errors.Is(err, sdk.ErrRemoved) {
		t.Fatalf("Ready on a removed group: %v", err)
	}
	// The name is free again.
	again, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack, sdk.WithName("trainer"))
	if err != nil {
		t.Fatalf("reusing the name of a removed group: %v", err)
	}
	// Removing a pending group cancels it.
	blocked, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 5}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	if err := blocked.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	ready(t, again)
	table, err := client.PlacementGroupTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, row := range table {
		states[row.ID] = row.State
	}
	if states[pg.ID] != "REMOVED" || states[blocked.ID] != "REMOVED" || states[again.ID] != "CREATED" {
		t.Fatalf("table states: %v", states)
	}
}

func TestGroupsDieWithTheirJobUnlessDetached(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil, func(cfg *gcs.Config) { cfg.JobLeaseTimeout = time.Second })
	c.AddRaylet(map[string]float64{"CPU": 4}, nil)
	ctx := testContext(t)
	observer := connect(t, c)

	// A driver that says goodbye.
	driver, err := sdk.Connect(ctx, sdk.Options{Address: c.GCS.Address(), Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	owned, err := driver.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack)
	if err != nil {
		t.Fatal(err)
	}
	detached, err := driver.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack, sdk.Detached(), sdk.WithName("keeper"))
	if err != nil {
		t.Fatal(err)
	}
	ready(t, owned)
	ready(t, detached)
	if err := driver.Close(); err != nil {
		t.Fatal(err)
	}
	stateOf := func(id string) string {
		table, err := observer.PlacementGroupTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range table {
			if row.ID == id {
				return row.State
			}
		}
		return "missing"
	}
	harness.Eventually(t, 5*time.Second, "the job's group removed", func() error {
		if s := stateOf(owned.ID); s != "REMOVED" {
			return fmt.Errorf("state %s", s)
		}
		return nil
	})
	if s := stateOf(detached.ID); s != "CREATED" {
		t.Fatalf("detached group is %s after its creator finished", s)
	}

	// A driver that dies without a goodbye: its lease lapses (1 s here).
	pgs := harness.DialPlacementGroups(t, c.GCS.Address())
	jobs := harness.Dial(t, c.GCS.Address()).Jobs
	job, err := jobs.AddJob(ctx, &pb.AddJobRequest{Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", CreatorJobId: job.Job.JobId,
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the silent driver's group removed", func() error {
		if s := stateOf(orphan.PlacementGroup.PlacementGroupId); s != "REMOVED" {
			return fmt.Errorf("state %s", s)
		}
		return nil
	})
}

func TestLabelSelectorsChooseNodes(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	a := c.AddRaylet(map[string]float64{"CPU": 4}, map[string]string{"zone": "a", "market": "spot"})
	b := c.AddRaylet(map[string]float64{"CPU": 4}, map[string]string{"zone": "b"})
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, sdk.Pack,
		sdk.WithBundleLabelSelector([]map[string]string{{"zone": "b"}, {"market": "!spot"}, {"zone": "in(a,c)"}, {"ray.io/node-id": b.NodeID()}}))
	if err != nil {
		t.Fatal(err)
	}
	got := nodesOf(ready(t, pg))
	want := []string{b.NodeID(), b.NodeID(), a.NodeID(), b.NodeID()}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bundle %d on %s, want %s", i, got[i], want[i])
		}
	}
	none, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}}, sdk.Pack, sdk.WithBundleLabelSelector([]map[string]string{{"zone": "!in(a,b)"}}))
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "unmatched selector is INFEASIBLE", func() error {
		info, err := none.Table(ctx)
		if err != nil {
			return err
		}
		if info.SchedulingState != "INFEASIBLE" {
			return fmt.Errorf("%s %q", info.SchedulingState, info.PendingReason)
		}
		return nil
	})
}

func TestNodeDeathReschedulesOnlyTheLostBundles(t *testing.T) {
	t.Parallel()
	c := harness.StartInProcess(t, nil)
	for i := 0; i < 4; i++ {
		c.AddRaylet(map[string]float64{"CPU": 2}, nil)
	}
	client := connect(t, c)
	ctx := testContext(t)
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"CPU": 1}, {"CPU": 1}, {"CPU": 1}}, sdk.StrictSpread)
	if err != nil {
		t.Fatal(err)
	}
	before := nodesOf(ready(t, pg))
	victim := c.Raylet(before[1])
	victim.Stop() // unregisters: DEAD at once
	var after []string
	harness.Eventually(t, 15*time.Second, "group CREATED again without the dead node", func() error {
		info, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		if info.State != "CREATED" {
			return fmt.Errorf("state %s", info.State)
		}
		after = nodesOf(info)
		return nil
	})
	if after[0] != before[0] || after[2] != before[2] {
		t.Fatalf("bundles that did not lose their node moved: %v → %v", before, after)
	}
	if after[1] == before[1] || distinct(after) != 3 {
		t.Fatalf("lost bundle placed at %s (before %v, after %v)", after[1], before, after)
	}
}
