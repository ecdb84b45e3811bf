package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

func cpuSet(t testing.TB, n float64) resources.Set {
	t.Helper()
	if n < 0 {
		return nil
	}
	set, err := resources.SetFromFloat(map[string]float64{"CPU": n})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestChooseNodes(t *testing.T) {
	node := func(id string, total, available float64) WorkNode {
		return WorkNode{ID: NodeID(id), Total: cpuSet(t, total), Available: cpuSet(t, available)}
	}
	draining := node("d", 64, 64)
	draining.Draining = true
	// Critical utilisation: a 0.75, b 0.25 (under the threshold, so 0), c 0.625; in tied
	// a, c and f are all 0.75.
	nodes := []WorkNode{node("c", 16, 6), node("a", 8, 2), node("b", 8, 6), draining}
	tied := []WorkNode{node("a", 8, 2), node("c", 16, 4), node("f", 4, 1)}
	group := &WorkGroup{ID: "pg1", Usable: true, BundleNodes: []NodeID{"c", "a", "c", ""}}
	pending := &WorkGroup{ID: "pg1", BundleNodes: []NodeID{"", "", "", ""}}
	rescheduling := &WorkGroup{ID: "pg1", Usable: true, BundleNodes: []NodeID{"c", "", "a", ""}}
	removed := &WorkGroup{ID: "pg1", Removed: true, BundleNodes: []NodeID{"", "", "", ""}}
	req := func(strategy WorkStrategy, cpus float64) WorkRequest {
		return WorkRequest{ID: "req-1", Strategy: strategy, Resources: cpuSet(t, cpus)}
	}
	inGroup := func(index int) WorkRequest {
		return WorkRequest{ID: "req-1", Strategy: WorkPlacementGroup, BundleIndex: index}
	}
	affinity := func(id string, soft bool, cpus float64) WorkRequest {
		r := req(WorkNodeAffinity, cpus)
		r.NodeID, r.Soft = NodeID(id), soft
		return r
	}
	spread := func(cursor uint64) WorkRequest {
		r := req(WorkSpread, 1)
		r.SpreadCursor = cursor
		return r
	}
	any := func(ids ...string) []Target {
		var out []Target
		for _, id := range ids {
			out = append(out, Target{Node: NodeID(id), BundleIndex: resources.AnyBundle})
		}
		return out
	}
	// The tie among a, c and f (all 0.75) for request "req-1" follows tieBreak.
	tieOrder := []string{"a", "c", "f"}
	slices.SortFunc(tieOrder, func(x, y string) int {
		return cmp.Compare(tieBreak("req-1", NodeID(x)), tieBreak("req-1", NodeID(y)))
	})
	cases := []struct {
		name    string
		req     WorkRequest
		nodes   []WorkNode
		group   *WorkGroup
		outcome WorkOutcome
		targets []Target
		later   []Target
		cause   ReasonCode
		message string // substring
	}{
		{"default: under the threshold first, then least utilised", req(WorkDefault, 1), nodes, nil, WorkPlaced, any("b", "c", "a"), nil, "", ""},
		{"default: only nodes with room, the rest later", req(WorkDefault, 3), nodes, nil, WorkPlaced, any("b", "c"), any("a"), "", ""},
		{"default: packs in id order under the threshold", req(WorkDefault, 1), []WorkNode{node("z", 8, 8), node("y", 8, 5), node("x", 8, 8)}, nil, WorkPlaced, any("x", "y", "z"), nil, "", ""},
		{"default: equal scores in the request's shuffle", req(WorkDefault, 1), tied, nil, WorkPlaced, any(tieOrder...), nil, "", ""},
		{"default: no room now", req(WorkDefault, 7), nodes, nil, WorkNotNow, nil, any("b", "c", "a"), "", "no node has {CPU: 7} available now"},
		{"default: infeasible", req(WorkDefault, 32), nodes, nil, WorkInfeasible, nil, nil, "", "infeasible: no ALIVE node has {CPU: 32} in total"},
		{"default: zero request fits anywhere", req(WorkDefault, -1), nodes, nil, WorkPlaced, any("b", "c", "a"), nil, "", ""},
		{"default: no nodes", req(WorkDefault, 1), nil, nil, WorkInfeasible, nil, nil, "", "no ALIVE node that is not draining"},
		{"spread: round starts at the cursor", spread(0), nodes, nil, WorkPlaced, any("a", "b", "c"), nil, "", ""},
		{"spread: next cursor, next node first", spread(1), nodes, nil, WorkPlaced, any("b", "c", "a"), nil, "", ""},
		{"spread: cursor wraps", spread(5), nodes, nil, WorkPlaced, any("c", "a", "b"), nil, "", ""},
		{"group: the bundle's node", inGroup(1), nodes, group, WorkPlaced, []Target{{Node: "a", BundleIndex: 1}}, nil, "", ""},
		{"group: any bundle, distinct nodes in bundle order", inGroup(-1), nodes, group, WorkPlaced, any("c", "a"), nil, "", ""},
		{"group: bundle not placed", inGroup(3), nodes, group, WorkNotNow, nil, nil, ReasonBundleNotPlaced, "waiting for placement group pg1 bundle 3"},
		{"group: not created yet", inGroup(0), nodes, pending, WorkNotNow, nil, nil, ReasonGroupNotReady, "waiting for placement group pg1 bundle 0"},
		{"group: rescheduling keeps placed bundles", inGroup(2), nodes, rescheduling, WorkPlaced, []Target{{Node: "a", BundleIndex: 2}}, nil, "", ""},
		{"group: rescheduling, lost bundle waits", inGroup(1), nodes, rescheduling, WorkNotNow, nil, nil, ReasonBundleNotPlaced, "bundle 1"},
		{"group: bundle on a node no longer alive", inGroup(0), nodes[1:], group, WorkNotNow, nil, nil, ReasonBundleNotPlaced, "bundle 0"},
		{"group: removed", inGroup(0), nodes, removed, WorkUnschedulable, nil, nil, ReasonGroupRemoved, "removed"},
		{"group: unknown", inGroup(0), nodes, nil, WorkUnschedulable, nil, nil, ReasonGroupRemoved, "removed"},
		{"affinity: the node", affinity("a", false, 1), nodes, nil, WorkPlaced, any("a"), nil, "", ""},
		{"affinity soft: the node, then default", affinity("a", true, 1), nodes, nil, WorkPlaced, any("a", "b", "c"), nil, "", ""},
		{"affinity hard: no room waits", affinity("a", false, 3), nodes, nil, WorkNotNow, nil, any("a"), ReasonInsufficientAvailable, "node a does not have {CPU: 3} available now"},
		{"affinity soft: no room falls back", affinity("a", true, 3), nodes, nil, WorkPlaced, any("b", "c"), nil, "", ""},
		{"affinity hard: dead node fails", affinity("zz", false, 1), nodes, nil, WorkUnschedulable, nil, nil, ReasonDead, "node affinity (soft=false): node zz is not ALIVE"},
		{"affinity soft: dead node falls back", affinity("zz", true, 1), nodes, nil, WorkPlaced, any("b", "c", "a"), nil, "", ""},
		{"affinity soft: nowhere to fall back", affinity("zz", true, 32), nodes, nil, WorkInfeasible, nil, nil, "", "node zz is not ALIVE; infeasible"},
		{"affinity hard: never fits fails", affinity("a", false, 9), nodes, nil, WorkUnschedulable, nil, nil, ReasonInsufficientTotal, "node a can never hold {CPU: 9}"},
		{"affinity hard: draining waits", affinity("d", false, 1), nodes, nil, WorkNotNow, nil, nil, ReasonDraining, "node d is draining"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ChooseNodes(tc.req, tc.nodes, tc.group)
			if got.Outcome != tc.outcome {
				t.Errorf("outcome %v, want %v (%s)", got.Outcome, tc.outcome, got.Message)
			}
			if !slices.Equal(got.Targets, tc.targets) {
				t.Errorf("targets %v, want %v", got.Targets, tc.targets)
			}
			if !slices.Equal(got.Later, tc.later) {
				t.Errorf("later %v, want %v", got.Later, tc.later)
			}
			if got.Cause.Code != tc.cause {
				t.Errorf("cause %q, want %q", got.Cause.Code, tc.cause)
			}
			if (tc.message == "") != (got.Message == "") || !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q, want %q", got.Message, tc.message)
			}
		})
	}
}

func TestChooseNodesRejectionsNameTheShortResource(t *testing.T) {
	nodes := []WorkNode{
		{ID: "small", Total: cpuSet(t, 2), Available: cpuSet(t, 2)},
		{ID: "busy", Total: cpuSet(t, 8), Available: cpuSet(t, 1)},
		{ID: "gone", Total: cpuSet(t, 8), Available: cpuSet(t, 8), Draining: true},
	}
	got := ChooseNodes(WorkRequest{ID: "r", Resources: cpuSet(t, 4)}, nodes, nil)
	want := []NodeRejection{
		{Node: "busy", Reason: Reason{Code: ReasonInsufficientAvailable, Resource: "CPU", Want: 4 * resources.AmountScale, Have: 1 * resources.AmountScale, Total: 8 * resources.AmountScale}},
		{Node: "gone", Reason: Reason{Code: ReasonDraining}},
		{Node: "small", Reason: Reason{Code: ReasonInsufficientTotal, Resource: "CPU", Want: 4 * resources.AmountScale, Have: 2 * resources.AmountScale, Total: 2 * resources.AmountScale}},
	}
	if !slices.Equal(got.Rejected, want) {
		t.Errorf("rejected %v, want %v", got.Rejected, want)
	}
	if got.Outcome != WorkNotNow || !slices.Equal(got.Later, []Target{{Node: "busy", BundleIndex: resources.AnyBundle}}) {
		t.Errorf("outcome %v later %v, want not now on busy", got.Outcome, got.Later)
	}
}

// TestChooseNodesProperties checks, on seeded random clusters, what every decision must
// hold: targets have room now and are neither draining nor repeated, later nodes could
// hold the work but not now, every other node is rejected with a reason, the order of
// the input does not matter, DEFAULT orders by its score, and SPREAD's rounds lead with
// every node in turn.
func TestChooseNodesProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 500 {
		n := rng.IntN(8)
		nodes := make([]WorkNode, n)
		for i := range nodes {
			total := float64(1 + rng.IntN(16))
			gpus := float64(rng.IntN(3))
			nodes[i] = WorkNode{ID: NodeID(fmt.Sprintf("n%02d", rng.IntN(100)*10+i)), Draining: rng.IntN(6) == 0}
			nodes[i].Total, _ = resources.SetFromFloat(map[string]float64{"CPU": total, "GPU": gpus})
			nodes[i].Available, _ = resources.SetFromFloat(map[string]float64{"CPU": float64(rng.IntN(int(total) + 1)), "GPU": float64(rng.IntN(int(gpus) + 1))})
		}
		request, _ := resources.SetFromFloat(map[string]float64{"CPU": float64(rng.IntN(6)), "GPU": float64(rng.IntN(2))})
		req := WorkRequest{ID: fmt.Sprintf("req-%d", round), Resources: request, Strategy: WorkStrategy(rng.IntN(2)), SpreadCursor: rng.Uint64N(20)}
		name := fmt.Sprintf("round %d (%v, %s, %d nodes)", round, req.Strategy, request, n)

		got := ChooseNodes(req, nodes, nil)
		byID := map[NodeID]WorkNode{}
		for _, node := range nodes {
			byID[node.ID] = node
		}
		seen := map[NodeID]bool{}
		for _, target := range got.Targets {
			node := byID[target.Node]
			if seen[target.Node] || node.Draining || !request.IsSubsetOf(node.Available) {
				t.Fatalf("%s: target %s repeated, draining or without room: %+v", name, target.Node, got)
			}
			seen[target.Node] = true
		}
		for _, target := range got.Later {
			node := byID[target.Node]
			if seen[target.Node] || node.Draining || !request.IsSubsetOf(node.Total) || request.IsSubsetOf(node.Available) {
				t.Fatalf("%s: later %s repeated, draining, too small or with room: %+v", name, target.Node, got)
			}
			seen[target.Node] = true
		}
		for _, r := range got.Rejected {
			if r.Reason.Code == "" {
				t.Fatalf("%s: node %s rejected without a reason", name, r.Node)
			}
			if r.Reason.Code != ReasonInsufficientAvailable && seen[r.Node] {
				t.Fatalf("%s: node %s both chosen and rejected (%s)", name, r.Node, r.Reason)
			}
			seen[r.Node] = true
		}
		if len(seen) != len(byID) {
			t.Fatalf("%s: %d of %d nodes accounted for: %+v", name, len(seen), len(byID), got)
		}
		if (got.Outcome == WorkPlaced) != (len(got.Targets) > 0) || (got.Outcome != WorkPlaced && got.Message == "") {
			t.Fatalf("%s: outcome %v with %d targets, message %q", name, got.Outcome, len(got.Targets), got.Message)
		}

		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if again := ChooseNodes(req, shuffled, nil); !slices.Equal(again.Targets, got.Targets) || !slices.Equal(again.Later, got.Later) || again.Message != got.Message {
			t.Fatalf("%s: the input order changed the decision: %+v vs %+v", name, got, again)
		}

		if req.Strategy == WorkDefault {
			for i := 1; i < len(got.Targets); i++ {
				prev := hybridScore(byID[got.Targets[i-1].Node], DefaultSpreadThreshold)
				next := hybridScore(byID[got.Targets[i].Node], DefaultSpreadThreshold)
				if prev > next || (prev == 0 && next == 0 && got.Targets[i-1].Node > got.Targets[i].Node) {
					t.Fatalf("%s: DEFAULT order %v breaks the hybrid score (%v then %v)", name, got.Targets, prev, next)
				}
			}
		}
		if req.Strategy == WorkSpread && len(got.Later) == 0 && len(got.Targets) > 0 {
			// With every feasible node free, len(targets) consecutive rounds lead with
			// each of them once.
			leaders := map[NodeID]bool{}
			for k := range uint64(len(got.Targets)) {
				r := req
				r.SpreadCursor = req.SpreadCursor + k
				leaders[ChooseNodes(r, nodes, nil).Targets[0].Node] = true
			}
			if len(leaders) != len(got.Targets) {
				t.Fatalf("%s: SPREAD rounds led with %d distinct nodes of %d", name, len(leaders), len(got.Targets))
			}
		}
	}
}

// Ties above the threshold are shuffled per request: over many requests each tied node
// leads some of them, and one request always gets the same order.
func TestChooseNodesTieShuffleIsSeededByTheRequest(t *testing.T) {
	nodes := []WorkNode{
		{ID: "a", Total: cpuSet(t, 8), Available: cpuSet(t, 2)},
		{ID: "b", Total: cpuSet(t, 8), Available: cpuSet(t, 2)},
		{ID: "c", Total: cpuSet(t, 8), Available: cpuSet(t, 2)},
	}
	leaders := map[NodeID]int{}
	for i := range 60 {
		req := WorkRequest{ID: fmt.Sprintf("actor-%d", i), Resources: cpuSet(t, 1)}
		first := ChooseNodes(req, nodes, nil)
		if again := ChooseNodes(req, nodes, nil); !slices.Equal(first.Targets, again.Targets) {
			t.Fatalf("request %s: %v then %v", req.ID, first.Targets, again.Targets)
		}
		leaders[first.Targets[0].Node]++
	}
	if len(leaders) != 3 {
		t.Errorf("leaders over 60 requests: %v, want each of a, b, c", leaders)
	}
}

// Label selectors on single-shape work (Ray's label_selector option and
// NodeLabelSchedulingStrategy): hard ones filter, soft ones order.
func TestChooseNodesLabelSelectors(t *testing.T) {
	node := func(id string, available float64, labels map[string]string) WorkNode {
		return WorkNode{ID: NodeID(id), Total: cpuSet(t, 8), Available: cpuSet(t, available), Labels: labels}
	}
	// a is the least loaded, so DEFAULT packs onto it first without selectors.
	nodes := []WorkNode{
		node("a", 8, map[string]string{"zone": "x"}),
		node("b", 8, map[string]string{"zone": "y", "gpu": "h100"}),
		node("c", 0, map[string]string{"zone": "y"}),
	}
	selector := func(s map[string]string) nodelabel.Selector {
		parsed, err := nodelabel.ParseSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	ids := func(targets []Target) []string {
		var out []string
		for _, target := range targets {
			out = append(out, string(target.Node))
		}
		return out
	}
	cases := []struct {
		name          string
		hard, soft    map[string]string
		strategy      WorkStrategy
		outcome       WorkOutcome
		targets       []string
		later         []string
		message       string
		rejectedLabel []string
	}{
		{"no selector", nil, nil, WorkDefault, WorkPlaced, []string{"a", "b"}, []string{"c"}, "", nil},
		{"hard in", map[string]string{"zone": "y"}, nil, WorkDefault, WorkPlaced, []string{"b"}, []string{"c"}, "", []string{"a"}},
		{"hard not in", map[string]string{"zone": "!y"}, nil, WorkDefault, WorkPlaced, []string{"a"}, nil, "", []string{"b", "c"}},
		{"hard exists", map[string]string{"gpu": "exists()"}, nil, WorkDefault, WorkPlaced, []string{"b"}, nil, "", []string{"a", "c"}},
		{"hard does not exist", map[string]string{"gpu": "!exists()"}, nil, WorkDefault, WorkPlaced, []string{"a"}, []string{"c"}, "", []string{"b"}},
		{"hard, matching node full", map[string]string{"zone": "y", "gpu": "!exists()"}, nil, WorkDefault, WorkNotNow, nil, []string{"c"}, "no node has", []string{"a", "b"}},
		{"hard, no node matches", map[string]string{"zone": "in(p,q)"}, nil, WorkDefault, WorkInfeasible, nil, nil, "no ALIVE node matches label_selector {zone: in(p,q)}", []string{"a", "b", "c"}},
		{"soft first", nil, map[string]string{"gpu": "h100"}, WorkDefault, WorkPlaced, []string{"b", "a"}, []string{"c"}, "", nil},
		{"soft, no node matches: as without", nil, map[string]string{"zone": "q"}, WorkDefault, WorkPlaced, []string{"a", "b"}, []string{"c"}, "", nil},
		{"hard and soft", map[string]string{"zone": "exists()"}, map[string]string{"zone": "y"}, WorkDefault, WorkPlaced, []string{"b", "a"}, []string{"c"}, "", nil},
		{"spread with hard", map[string]string{"zone": "y"}, nil, WorkSpread, WorkPlaced, []string{"b"}, []string{"c"}, "", []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := WorkRequest{ID: "req-1", Strategy: tc.strategy, Resources: cpuSet(t, 1),
				LabelSelector: selector(tc.hard), SoftLabelSelector: selector(tc.soft)}
			got := ChooseNodes(req, nodes, nil)
			if got.Outcome != tc.outcome {
				t.Errorf("outcome %v, want %v (%s)", got.Outcome, tc.outcome, got.Message)
			}
			if !slices.Equal(ids(got.Targets), tc.targets) || !slices.Equal(ids(got.Later), tc.later) {
				t.Errorf("targets %v later %v, want %v and %v", ids(got.Targets), ids(got.Later), tc.targets, tc.later)
			}
			if !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q, want %q", got.Message, tc.message)
			}
			var rejected []string
			for _, r := range got.Rejected {
				if r.Reason.Code == ReasonLabelMismatch {
					rejected = append(rejected, string(r.Node))
				}
			}
			if !slices.Equal(rejected, tc.rejectedLabel) {
				t.Errorf("rejected for labels %v, want %v", rejected, tc.rejectedLabel)
			}
		})
	}
}
