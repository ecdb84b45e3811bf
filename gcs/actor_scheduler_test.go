package gcs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func parseResources(t *testing.T, amounts map[string]float64) resources.Set {
	t.Helper()
	set, err := resources.SetFromFloat(amounts)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestChooseActorNodes(t *testing.T) {
	cpu := func(n float64) map[string]float64 { return map[string]float64{"CPU": n} }
	node := func(id string, total, available float64) placement.WorkNode {
		return placement.WorkNode{ID: placement.NodeID(id), Total: parseResources(t, cpu(total)), Available: parseResources(t, cpu(available))}
	}
	draining := node("d", 64, 64)
	draining.Draining = true
	// Critical utilisation: a 0.75, b 0.25 (under scheduler_spread_threshold), c 0.75.
	nodes := []placement.WorkNode{node("a", 8, 2), node("b", 8, 6), node("c", 16, 4), draining}
	info := func(state pb.PlacementGroupState, bundleNodes ...string) *pb.PlacementGroupInfo {
		g := &pb.PlacementGroupInfo{PlacementGroupId: "pg1", State: state}
		for i, n := range bundleNodes {
			g.Bundles = append(g.Bundles, &pb.Bundle{BundleIndex: int32(i), NodeId: n})
		}
		return g
	}
	group := newWorkGroup(info(pb.PlacementGroupState_CREATED, "c", "a", "c", ""))
	pending := newWorkGroup(info(pb.PlacementGroupState_PENDING, "", "", "", ""))
	rescheduling := newWorkGroup(info(pb.PlacementGroupState_RESCHEDULING, "c", "", "a", ""))
	removed := newWorkGroup(info(pb.PlacementGroupState_REMOVED, "", "", "", ""))
	strategy := func(kind pb.SchedulingStrategyKind) *pb.SchedulingStrategy { return &pb.SchedulingStrategy{Kind: kind} }
	inGroup := func(index int32) *pb.SchedulingStrategy {
		return &pb.SchedulingStrategy{Kind: strategyPlacementGroup, PlacementGroupId: "pg1", BundleIndex: index}
	}
	affinity := func(id string, soft bool) *pb.SchedulingStrategy {
		return &pb.SchedulingStrategy{Kind: strategyNodeAffinity, NodeId: id, Soft: soft}
	}
	t1 := func(id string, bundle int32) leaseTarget { return leaseTarget{NodeID: id, BundleIndex: bundle} }
	// a and c tie above the threshold: the actor id orders them.
	const actorID = "actor-1"
	tied := []leaseTarget{t1("a", -1), t1("c", -1)}
	if ac := placement.ChooseNodes(placement.WorkRequest{ID: actorID, Resources: parseResources(t, cpu(1))}, []placement.WorkNode{nodes[0], nodes[2]}, nil); ac.Targets[0].Node == "c" {
		tied = []leaseTarget{t1("c", -1), t1("a", -1)}
	}
	cases := []struct {
		name       string
		strategy   *pb.SchedulingStrategy
		request    map[string]float64
		nodes      []placement.WorkNode
		group      *placement.WorkGroup
		want       []leaseTarget
		wait, fail string // substrings
	}{
		{"default: under the spread threshold first, draining left out", strategy(strategyDefault), cpu(1), nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"default: only nodes with room", nil, cpu(3), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1)}, "", ""},
		{"default: no room now", strategy(strategyDefault), cpu(7), nodes, nil, nil, "no node has {CPU: 7} available now", ""},
		{"default: infeasible", strategy(strategyDefault), cpu(32), nodes, nil, nil, "infeasible", ""},
		{"default: zero request fits anywhere", strategy(strategyDefault), nil, nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"default: no nodes", strategy(strategyDefault), cpu(1), nil, nil, nil, "no ALIVE node", ""},
		{"spread: round-robin from the cursor", strategy(strategySpread), cpu(1), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1), t1("a", -1)}, "", ""},
		{"group: the bundle's node", inGroup(1), cpu(1), nodes, group, []leaseTarget{t1("a", 1)}, "", ""},
		{"group: any bundle, distinct nodes in bundle order", inGroup(-1), nil, nodes, group, []leaseTarget{t1("c", -1), t1("a", -1)}, "", ""},
		{"group: bundle not placed", inGroup(3), nil, nodes, group, nil, "waiting for placement group pg1 bundle 3", ""},
		{"group: not created yet", inGroup(0), nil, nodes, pending, nil, "waiting for placement group pg1 bundle 0", ""},
		{"group: rescheduling keeps placed bundles", inGroup(2), nil, nodes, rescheduling, []leaseTarget{t1("a", 2)}, "", ""},
		{"group: rescheduling, lost bundle waits", inGroup(1), nil, nodes, rescheduling, nil, "waiting for placement group pg1 bundle 1", ""},
		{"group: bundle on a node no longer alive", inGroup(0), nil, nodes[:2], group, nil, "waiting for placement group pg1 bundle 0", ""},
		{"group: removed", inGroup(0), nil, nodes, removed, nil, "", deathGroupRemoved},
		{"group: unknown", inGroup(0), nil, nodes, nil, nil, "", deathGroupRemoved},
		{"affinity: the node", affinity("a", false), cpu(1), nodes, nil, []leaseTarget{t1("a", -1)}, "", ""},
		{"affinity soft: the node, then default", affinity("a", true), cpu(1), nodes, nil, []leaseTarget{t1("a", -1), t1("b", -1), t1("c", -1)}, "", ""},
		{"affinity hard: no room waits", affinity("a", false), cpu(3), nodes, nil, nil, "node a does not have {CPU: 3} available now", ""},
		{"affinity soft: no room falls back", affinity("a", true), cpu(3), nodes, nil, []leaseTarget{t1("b", -1), t1("c", -1)}, "", ""},
		{"affinity hard: dead node fails", affinity("zz", false), cpu(1), nodes, nil, nil, "", "node zz is not ALIVE"},
		{"affinity soft: dead node falls back", affinity("zz", true), cpu(1), nodes, nil, append([]leaseTarget{t1("b", -1)}, tied...), "", ""},
		{"affinity hard: never fits fails", affinity("a", false), cpu(9), nodes, nil, nil, "", "node a can never hold {CPU: 9}"},
		{"affinity hard: draining waits", affinity("d", false), cpu(1), nodes, nil, nil, "node d is draining", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := chooseActorNodes(workRequest(actorID, tc.strategy, parseResources(t, tc.request), 1), tc.nodes, tc.group)
			if !slices.Equal(got.Targets, tc.want) {
				t.Errorf("targets %v, want %v", got.Targets, tc.want)
			}
			if (tc.wait == "") != (got.Wait == "") || !strings.Contains(got.Wait, tc.wait) {
				t.Errorf("wait %q, want %q", got.Wait, tc.wait)
			}
			if (tc.fail == "") != (got.Fail == "") || !strings.Contains(got.Fail, tc.fail) {
				t.Errorf("fail %q, want %q", got.Fail, tc.fail)
			}
		})
	}
}

// midRoundAdmitter is the queues' admission with something happening while it decides,
// as a CreateActor or a restart does when it lands between a round's two halves.
type midRoundAdmitter struct {
	leaseAdmitter
	during func()
}

func (a *midRoundAdmitter) admitLeases(leases []leaseWork) leaseDecision {
	if a.during != nil {
		a.during()
		a.during = nil
	}
	return a.leaseAdmitter.admitLeases(leases)
}

// An actor outside groups that appears while admission decides (created, or restarted
// with its charge given back) is not placed in that round uncharged: it waits for the
// next round's decision. With queues off, the actors the round asked about are placed.
func TestAnActorArrivingWhileAdmissionDecidesIsNotPlacedUncharged(t *testing.T) {
	for _, queuesOn := range []bool{true, false} {
		f := newTwoPhaseFixture(t, "a")
		f.nodes.total = map[string]float64{"CPU": 64, "GPU": 32} // room for both actors
		if queuesOn {
			f.queues = issueQueues(t) // prod: 16 GPUs, no borrowing
		}
		f.m = f.newManager()
		newActor := func(id string, gpus float64) *actorEntry {
			info := &pb.ActorInfo{ActorId: id, JobId: "job", Namespace: "prod", ClassName: "Counter", State: pb.ActorState_ACTOR_PENDING_CREATION,
				RequiredResources: map[string]float64{"GPU": gpus}, SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyDefault}, BundleIndex: -1}
			return &actorEntry{info: info, request: parseResources(t, info.RequiredResources), changed: make(chan struct{})}
		}
		adm := &midRoundAdmitter{leaseAdmitter: f.m}
		m := newActorManager(actorDeps{store: store.NewMemory(), nodes: f.nodes, groups: f.m, leases: adm, now: time.Now, log: zerolog.Nop()})
		m.cancel() // a placement that starts gives up at once: the test reads who started one
		held := newActor("held", 17)
		m.actors[held.info.ActorId] = held
		late := newActor("late", 1)
		adm.during = func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.actors[late.info.ActorId] = late
		}
		m.scheduleRound(time.Now())

		m.mu.Lock()
		latePlacing, lateQueue, heldPlacing, heldCode := late.placing, late.info.Queue, held.placing, held.info.PendingReasonCode
		m.mu.Unlock()
		if queuesOn {
			if latePlacing || lateQueue != "" {
				t.Fatalf("queues on: the actor created mid-round is placing=%v with queue %q, want it unplaced and uncharged until the next round", latePlacing, lateQueue)
			}
			if heldPlacing || heldCode != string(pending.QuotaExceeded) {
				t.Fatalf("queues on: the 17-GPU actor is placing=%v with code %q, want held with QuotaExceeded", heldPlacing, heldCode)
			}
			m.scheduleRound(time.Now())
			m.mu.Lock()
			latePlacing, lateQueue = late.placing, late.info.Queue
			m.mu.Unlock()
			if !latePlacing || lateQueue != "prod" {
				t.Fatalf("queues on, next round: the late actor is placing=%v with queue %q, want placed charged to prod", latePlacing, lateQueue)
			}
			continue
		}
		if latePlacing || !heldPlacing {
			t.Fatalf("queues off: placing late=%v held=%v, want the actor asked about placed and the late one left to the next round", latePlacing, heldPlacing)
		}
	}
}

// Resource reports and created groups wake the actor loop only while an actor is
// pending: with none, the round they would start has nothing to do.
func TestReportsWakeTheActorLoopOnlyWhileAnActorIsPending(t *testing.T) {
	f := newTwoPhaseFixture(t, "a")
	f.m = f.newManager()
	m := newActorManager(actorDeps{store: store.NewMemory(), nodes: f.nodes, groups: f.m, leases: f.m, now: time.Now, log: zerolog.Nop()})
	m.cancel() // a placement that starts gives up at once
	woken := func() bool {
		select {
		case <-m.wake:
			return true
		default:
			return false
		}
	}
	m.retryAllNow()
	if !woken() {
		t.Fatal("before any round, a report did not wake the loop")
	}
	m.scheduleRound(time.Now())
	m.onResourcesReported(false)
	m.onPlacementGroupCreated("pg")
	if woken() {
		t.Fatal("with no actor pending, a report woke the loop")
	}
	if !m.retryAll.Load() {
		t.Fatal("a report with no actor pending did not leave the next round ignoring backoff")
	}
	info := &pb.ActorInfo{ActorId: "a1", JobId: "job", Namespace: "ns", ClassName: "Counter", State: pb.ActorState_ACTOR_PENDING_CREATION,
		RequiredResources: map[string]float64{"CPU": 1}, SchedulingStrategy: &pb.SchedulingStrategy{Kind: strategyDefault}, BundleIndex: -1}
	m.mu.Lock()
	m.actors[info.ActorId] = &actorEntry{info: info, request: parseResources(t, info.RequiredResources), changed: make(chan struct{})}
	m.mu.Unlock()
	m.scheduleRound(time.Now())
	m.onResourcesReported(false)
	if !woken() {
		t.Fatal("with an actor pending, a report did not wake the loop")
	}
}
