package invariants

import (
	"reflect"
	"testing"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

func group(id string, state pb.PlacementGroupState, nodes ...string) *pb.PlacementGroupInfo {
	g := &pb.PlacementGroupInfo{PlacementGroupId: id, State: state}
	for i, node := range nodes {
		g.Bundles = append(g.Bundles, &pb.Bundle{BundleIndex: int32(i), NodeId: node})
	}
	return g
}

func held(id string, index int32, state pb.BundleReservationState, cpu float64) *pb.BundleReservation {
	return &pb.BundleReservation{Key: &pb.BundleKey{PlacementGroupId: id, BundleIndex: index}, State: state,
		Resources: map[string]float64{"CPU": cpu}}
}

const (
	committed = pb.BundleReservationState_BUNDLE_COMMITTED
	prepared  = pb.BundleReservationState_BUNDLE_PREPARED
	created   = pb.PlacementGroupState_CREATED
)

func node(id string, cpu float64, bundles ...*pb.BundleReservation) Node {
	return Node{ID: id, Alive: true, Total: map[string]float64{"CPU": cpu}, Bundles: bundles}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name   string
		groups []*pb.PlacementGroupInfo
		nodes  []Node
		want   []Violation
	}{
		{"settled", []*pb.PlacementGroupInfo{group("g", created, "a", "b"), group("p", pb.PlacementGroupState_PENDING, "")},
			[]Node{node("a", 4, held("g", 0, committed, 1)), node("b", 4, held("g", 1, committed, 1))}, nil},
		{"created with an unplaced bundle", []*pb.PlacementGroupInfo{group("g", created, "a", "")},
			[]Node{node("a", 4, held("g", 0, committed, 1))},
			[]Violation{{PartialGang, "CREATED group g: bundle 1 is not placed"}}},
		{"created but only prepared", []*pb.PlacementGroupInfo{group("g", created, "a")},
			[]Node{node("a", 4, held("g", 0, prepared, 1))},
			[]Violation{{PartialGang, "CREATED group g: bundle 0 is not held committed on a"}}},
		{"held twice", []*pb.PlacementGroupInfo{group("g", created, "a")},
			[]Node{node("a", 4, held("g", 0, committed, 1)), node("b", 4, held("g", 0, committed, 1))},
			[]Violation{{DoubleAllocation, "bundle g[0] is held on a and b"}, {Leak, "node b holds bundle g[0] (committed), which no live group has there"}}},
		{"more than the node's total", []*pb.PlacementGroupInfo{group("g", created, "a", "a")},
			[]Node{node("a", 1, held("g", 0, committed, 1), held("g", 1, committed, 0.5))},
			[]Violation{{DoubleAllocation, "node a holds 1.5 CPU in bundles, its total is 1"}}},
		{"removed group still held", []*pb.PlacementGroupInfo{group("g", pb.PlacementGroupState_REMOVED, "")},
			[]Node{node("a", 4, held("g", 0, committed, 1))},
			[]Violation{{Leak, "node a holds bundle g[0] (committed), which no live group has there"}}},
		{"placed but not held", []*pb.PlacementGroupInfo{group("g", pb.PlacementGroupState_RESCHEDULING, "a", "")},
			[]Node{node("a", 4)},
			[]Violation{{Lost, "the table places bundle g[0] on a, which does not hold it"}}},
		{"dead nodes are not asked", []*pb.PlacementGroupInfo{group("g", created, "a")},
			[]Node{{ID: "a", Alive: false}}, nil},
	}
	for _, c := range cases {
		if got := Check(c.groups, c.nodes); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func TestSettledKeepsOnlyWhatEveryViewShows(t *testing.T) {
	transient := Violation{Leak, "node a holds bundle g[0] (prepared), which no live group has there"}
	real := Violation{DoubleAllocation, "bundle h[0] is held on a and b"}
	if got := Settled([]Violation{transient, real}, []Violation{real}); !reflect.DeepEqual(got, []Violation{real}) {
		t.Errorf("Settled = %v", got)
	}
	if got := Settled(); got != nil {
		t.Errorf("Settled() = %v", got)
	}
}

// queued is a group of the queue with one bundle of gpus GPUs per entry.
func queued(id, queue string, state pb.PlacementGroupState, gpus ...float64) *pb.PlacementGroupInfo {
	g := &pb.PlacementGroupInfo{PlacementGroupId: id, State: state, Queue: queue}
	for i, n := range gpus {
		g.Bundles = append(g.Bundles, &pb.Bundle{BundleIndex: int32(i), NodeId: "a", UnitResources: map[string]float64{"GPU": n}})
	}
	return g
}

func queue(name, cohort string, nominal, borrowing float64) *pb.QueueStatus {
	return &pb.QueueStatus{Queue: name, Cohort: cohort,
		Resources: []*pb.QueueResourceStatus{{Resource: "GPU", Limited: true, NominalQuota: nominal, BorrowingLimit: borrowing}}}
}

// chargedActor is a 1-GPU actor whose row names queue (empty: holds no charge).
func chargedActor(id, queue string, state pb.ActorState, group string) *pb.ActorInfo {
	return &pb.ActorInfo{ActorId: id, Queue: queue, State: state, PlacementGroupId: group, RequiredResources: map[string]float64{"GPU": 1}}
}

func TestCheckQuotas(t *testing.T) {
	const pendingState, removed, rescheduling = pb.PlacementGroupState_PENDING, pb.PlacementGroupState_REMOVED, pb.PlacementGroupState_RESCHEDULING
	cases := []struct {
		name   string
		groups []*pb.PlacementGroupInfo
		actors []*pb.ActorInfo
		queues []*pb.QueueStatus
		want   []Violation
	}{
		{"within nominal", []*pb.PlacementGroupInfo{queued("g", "a", created, 2, 2)}, nil, []*pb.QueueStatus{queue("a", "", 4, 0)}, nil},
		{"over nominal without a cohort", []*pb.PlacementGroupInfo{queued("g", "a", created, 4), queued("h", "a", rescheduling, 1)}, nil,
			[]*pb.QueueStatus{queue("a", "", 4, -1)},
			[]Violation{{QuotaOverrun, "queue a holds 5 GPU, its limit is 4 (nominal 4)"}}},
		{"pending and removed groups hold nothing", []*pb.PlacementGroupInfo{queued("g", "a", pendingState, 8), queued("h", "a", removed, 8), queued("i", "a", created, 4)}, nil,
			[]*pb.QueueStatus{queue("a", "", 4, 0)}, nil},
		{"borrowing within the limit and the cohort", []*pb.PlacementGroupInfo{queued("g", "a", created, 6)}, nil,
			[]*pb.QueueStatus{queue("a", "c", 4, 2), queue("b", "c", 4, 0)}, nil},
		{"borrowing over the limit", []*pb.PlacementGroupInfo{queued("g", "a", created, 7)}, nil,
			[]*pb.QueueStatus{queue("a", "c", 4, 2), queue("b", "c", 4, 0)},
			[]Violation{{QuotaOverrun, "queue a holds 7 GPU, its limit is 6 (nominal 4)"}}},
		{"a cohort over its queues' quotas", []*pb.PlacementGroupInfo{queued("g", "a", created, 6), queued("h", "b", created, 3)}, nil,
			[]*pb.QueueStatus{queue("a", "c", 4, -1), queue("b", "c", 4, -1)},
			[]Violation{{QuotaOverrun, "cohort c holds 9 GPU, its queues' nominal quotas add up to 8"}}},
		{"resources a queue does not list are not limited", []*pb.PlacementGroupInfo{queued("g", "a", created, 6)}, nil,
			[]*pb.QueueStatus{{Queue: "a", Resources: []*pb.QueueResourceStatus{{Resource: "GPU", NominalQuota: 0, Usage: 6}}}}, nil},
		{"actors outside groups hold their queue's quota", []*pb.PlacementGroupInfo{queued("g", "a", created, 2)},
			[]*pb.ActorInfo{chargedActor("x", "a", pb.ActorState_ACTOR_ALIVE, ""), chargedActor("y", "a", pb.ActorState_ACTOR_PENDING_CREATION, "")},
			[]*pb.QueueStatus{queue("a", "", 3, 0)},
			[]Violation{{QuotaOverrun, "queue a holds 4 GPU, its limit is 3 (nominal 3)"}}},
		{"dead actors, actors in groups and actors without a charge hold nothing", nil,
			[]*pb.ActorInfo{chargedActor("x", "a", pb.ActorState_ACTOR_DEAD, ""), chargedActor("y", "a", pb.ActorState_ACTOR_ALIVE, "g"),
				chargedActor("z", "", pb.ActorState_ACTOR_ALIVE, "")},
			[]*pb.QueueStatus{queue("a", "", 0, 0)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckQuotas(tc.groups, tc.actors, tc.queues); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
