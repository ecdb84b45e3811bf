package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/invariants"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// A seeded random sequence of creates, removes, raylet deaths and joins against a real
// GCS and real raylets: after it settles, the invariants of DESIGN.md hold — no partial
// gang, every reservation a raylet holds is one the GCS placed (no double allocation, no
// leak), and after removing everything the raylets hold nothing.
func TestRandomCreateRemoveAndNodeDeathKeepInvariants(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

func runChaos(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	c := harness.StartInProcess(t, nil)
	alive := map[string]*raylet.Raylet{}
	addNode := func() {
		r := c.AddRaylet(map[string]float64{"CPU": 4, "GPU": float64(2 * rng.IntN(2))}, map[string]string{"zone": []string{"a", "b"}[rng.IntN(2)]})
		alive[r.NodeID()] = r
	}
	for i := 0; i < 5; i++ {
		addNode()
	}
	client := connect(t, c)
	ctx := testContext(t)
	strategies := []sdk.Strategy{sdk.Pack, sdk.Spread, sdk.StrictPack, sdk.StrictSpread}
	var groups []*sdk.PlacementGroup
	for step := 0; step < 60; step++ {
		switch op := rng.IntN(10); {
		case op < 5:
			bundles := make([]sdk.Bundle, 1+rng.IntN(4))
			for i := range bundles {
				bundles[i] = sdk.Bundle{"CPU": 0.5 * float64(1+rng.IntN(4))}
				if rng.IntN(4) == 0 {
					bundles[i]["GPU"] = 1
				}
			}
			pg, err := client.CreatePlacementGroup(ctx, bundles, strategies[rng.IntN(len(strategies))])
			if err != nil {
				t.Fatalf("step %d: create: %v", step, err)
			}
			groups = append(groups, pg)
		case op < 8 && len(groups) > 0:
			i := rng.IntN(len(groups))
			if err := groups[i].Remove(ctx); err != nil {
				t.Fatalf("step %d: remove: %v", step, err)
			}
			groups = append(groups[:i], groups[i+1:]...)
		case op == 8 && len(alive) > 2:
			ids := sortedKeys(alive)
			victim := ids[rng.IntN(len(ids))]
			alive[victim].Stop()
			delete(alive, victim)
		case op == 9:
			addNode()
		}
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // let some two-phase commits finish
		}
	}
	harness.Eventually(t, 20*time.Second, "invariants after the random sequence", func() error {
		return checkInvariants(ctx, client, harness.DialPlacementGroups(t, c.GCS.Address()), alive)
	})
	for _, pg := range groups {
		if err := pg.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, 10*time.Second, "no reservation left after removing every group", func() error {
		for id, r := range alive {
			if held := r.Node().ResourcesAvailable; held["CPU"] != r.Node().ResourcesTotal["CPU"] || held["GPU"] != r.Node().ResourcesTotal["GPU"] {
				return fmt.Errorf("node %s still holds resources: available %v of %v", id, held, r.Node().ResourcesTotal)
			}
		}
		return nil
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkInvariants checks DESIGN.md's invariants (internal/invariants) on the settled
// cluster, and what settling must bring on top: no group left PREPARED or PENDING with a
// placed bundle, every reservation committed, strategies kept.
func checkInvariants(ctx context.Context, client *sdk.Client, pgs pb.PlacementGroupServiceClient, alive map[string]*raylet.Raylet) error {
	table, err := client.PlacementGroupTable(ctx)
	if err != nil {
		return err
	}
	for _, g := range table {
		if g.State == "REMOVED" { // holds nothing; its rows keep the last node ids, as Ray's
			continue
		}
		nodes := map[string]int{}
		for _, b := range g.Bundles {
			if b.NodeID == "" {
				continue
			}
			if g.State == "PENDING" {
				return fmt.Errorf("PENDING group %s shows bundle %d on %s", g.ID, b.Index, b.NodeID)
			}
			if alive[b.NodeID] == nil {
				return fmt.Errorf("group %s bundle %d on dead node %s", g.ID, b.Index, b.NodeID)
			}
			nodes[b.NodeID]++
		}
		switch {
		case g.State == "PREPARED":
			return fmt.Errorf("group %s still PREPARED", g.ID)
		case g.State == "CREATED" && g.Strategy == sdk.StrictPack && len(nodes) != 1:
			return fmt.Errorf("STRICT_PACK group %s on %d nodes", g.ID, len(nodes))
		case g.State == "CREATED" && g.Strategy == sdk.StrictSpread && len(nodes) != len(g.Bundles):
			return fmt.Errorf("STRICT_SPREAD group %s: %d bundles on %d nodes", g.ID, len(g.Bundles), len(nodes))
		}
	}
	raw, err := pgs.GetAllPlacementGroup(ctx, &pb.GetAllPlacementGroupRequest{})
	if err != nil {
		return err
	}
	var view []invariants.Node
	for id, r := range alive {
		stats, err := statsOf(ctx, r)
		if err != nil {
			return err
		}
		for _, b := range stats.Bundles {
			if b.State != pb.BundleReservationState_BUNDLE_COMMITTED {
				return fmt.Errorf("node %s holds bundle %s[%d] %s", id, b.Key.PlacementGroupId, b.Key.BundleIndex, b.State)
			}
		}
		view = append(view, invariants.Node{ID: id, Alive: true, Total: r.Node().ResourcesTotal, Bundles: stats.Bundles})
	}
	if violations := invariants.Check(raw.PlacementGroups, view); len(violations) > 0 {
		return fmt.Errorf("%d violations: %v", len(violations), violations)
	}
	return nil
}

func statsOf(ctx context.Context, r *raylet.Raylet) (*pb.GetNodeStatsReply, error) {
	return harnessNodeStats(ctx, r.Address())
}
