package placement

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Single-shape work (an actor, or the tasks of one scheduling key) needs one node, not a
// gang: ChooseNodes orders the nodes that may lease it a worker, as Ray's DEFAULT,
// SPREAD, NODE_AFFINITY and PLACEMENT_GROUP scheduling strategies do. The GCS runs it for
// actors and, through ActorInfoService.ChooseLeaseTargets, for the SDK's tasks.

// DefaultSpreadThreshold is Ray's scheduler_spread_threshold: DEFAULT packs onto a node
// while its critical resource utilisation stays below this fraction.
const DefaultSpreadThreshold = 0.5

// WorkStrategy is a Ray scheduling strategy for single-shape work.
type WorkStrategy int

const (
	// WorkDefault is Ray's hybrid policy: pack onto nodes below the spread threshold,
	// then the least utilised.
	WorkDefault WorkStrategy = iota
	// WorkSpread round-robins over the feasible nodes.
	WorkSpread
	// WorkNodeAffinity targets one node (WorkRequest.NodeID); Soft falls back to DEFAULT.
	WorkNodeAffinity
	// WorkPlacementGroup targets the node of a placement-group bundle.
	WorkPlacementGroup
)

func (s WorkStrategy) String() string {
	switch s {
	case WorkDefault:
		return "DEFAULT"
	case WorkSpread:
		return "SPREAD"
	case WorkNodeAffinity:
		return "NODE_AFFINITY"
	case WorkPlacementGroup:
		return "PLACEMENT_GROUP"
	default:
		return fmt.Sprintf("WorkStrategy(%d)", int(s))
	}
}

// WorkRequest is one piece of single-shape work to place.
type WorkRequest struct {
	// ID names the work (the actor id, the task's scheduling key): it seeds the shuffle
	// that breaks DEFAULT's ties, so a decision can be replayed.
	ID        string
	Resources resources.Set
	Strategy  WorkStrategy
	// NodeID and Soft: WorkNodeAffinity's node, and whether the work may go elsewhere
	// when that node is gone, draining or full.
	NodeID NodeID
	Soft   bool
	// BundleIndex: WorkPlacementGroup's bundle (resources.AnyBundle: any of the group's).
	BundleIndex int
	// SpreadCursor: WorkSpread starts its round at this position of the feasible nodes
	// (ordered by id); the caller advances it by one per decision.
	SpreadCursor uint64
	// SpreadThreshold: DEFAULT's packing threshold; 0 means DefaultSpreadThreshold.
	SpreadThreshold float64
	// LabelSelector (hard: only matching nodes) and SoftLabelSelector (matching nodes
	// first), with WorkDefault or WorkSpread: Ray's label_selector option and
	// NodeLabelSchedulingStrategy.
	LabelSelector, SoftLabelSelector nodelabel.Selector
}

// WorkNode is what the chooser knows of one ALIVE node.
type WorkNode struct {
	ID               NodeID
	Total, Available resources.Set
	Draining         bool
	Labels           map[string]string
}

// WorkGroup is what the chooser knows of the placement group a WorkPlacementGroup
// request names. Nil means the group is unknown (removed and forgotten).
type WorkGroup struct {
	ID string
	// Usable: the group's placed bundles hold their reservations (CREATED, or
	// RESCHEDULING after losing other bundles); Removed: it is gone for good.
	Usable, Removed bool
	// BundleNodes is each bundle's node ("" while it is not placed).
	BundleNodes []NodeID
}

// WorkOutcome is the kind of a Choice.
type WorkOutcome int

const (
	// WorkPlaced: Targets lists the nodes to ask, best first.
	WorkPlaced WorkOutcome = iota + 1
	// WorkNotNow: a node could hold the work once resources are freed (Later lists them)
	// or once its placement group is placed; wait.
	WorkNotNow
	// WorkInfeasible: no ALIVE node could ever hold it; wait for a node that can (the
	// autoscaler's demand).
	WorkInfeasible
	// WorkUnschedulable: it can never run as asked (a hard affinity to a node that is
	// gone or too small, a removed placement group); fail it.
	WorkUnschedulable
)

func (o WorkOutcome) String() string {
	switch o {
	case WorkPlaced:
		return "placed"
	case WorkNotNow:
		return "not now"
	case WorkInfeasible:
		return "infeasible"
	case WorkUnschedulable:
		return "unschedulable"
	default:
		return fmt.Sprintf("WorkOutcome(%d)", int(o))
	}
}

// Target is one node to ask for a worker lease, with the bundle index to pass
// (resources.AnyBundle outside placement groups, or for any bundle of the group).
type Target struct {
	Node        NodeID
	BundleIndex int
}

// NodeRejection is one node left out of a Choice, and why.
type NodeRejection struct {
	Node   NodeID
	Reason Reason
}

// Choice is ChooseNodes' decision.
type Choice struct {
	Outcome WorkOutcome
	// Targets: nodes with room now, best first (WorkPlaced; a soft affinity may add
	// fallbacks). Later: nodes that could hold the work once resources are freed, in the
	// same order; a caller that queues its request may queue it on one of them.
	Targets, Later []Target
	// Cause is the reason that decided an outcome other than WorkPlaced when it is not
	// one node's (group_not_ready, bundle_not_placed, group_removed), or the affinity
	// node's; zero otherwise.
	Cause Reason
	// Rejected lists the nodes left out, by node id, with why.
	Rejected []NodeRejection
	// Message says why in a sentence: the pending reason or death cause shown to users.
	Message string
}

// ChooseNodes decides where one piece of single-shape work may lease a worker. It is
// pure and deterministic: the same request and nodes, in any order, give the same
// Choice. group is only read for WorkPlacementGroup.
func ChooseNodes(req WorkRequest, nodes []WorkNode, group *WorkGroup) Choice {
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b WorkNode) int { return cmp.Compare(a.ID, b.ID) })
	switch req.Strategy {
	case WorkPlacementGroup:
		return chooseInGroup(req, sorted, group)
	case WorkNodeAffinity:
		return chooseAffinity(req, sorted)
	default:
		return chooseByPolicy(req, sorted, "")
	}
}

// chooseInGroup targets the node of the requested bundle, or with any bundle the nodes
// holding the group's bundles in bundle order. The raylet checks the bundle's room.
func chooseInGroup(req WorkRequest, nodes []WorkNode, group *WorkGroup) Choice {
	if group == nil || group.Removed {
		id := ""
		if group != nil {
			id = group.ID
		}
		return Choice{Outcome: WorkUnschedulable, Cause: Reason{Code: ReasonGroupRemoved},
			Message: fmt.Sprintf("placement group %s removed", id)}
	}
	wait := Choice{Outcome: WorkNotNow, Message: fmt.Sprintf("waiting for placement group %s bundle %d", group.ID, req.BundleIndex)}
	if !group.Usable {
		wait.Cause = Reason{Code: ReasonGroupNotReady}
		return wait
	}
	wait.Cause = Reason{Code: ReasonBundleNotPlaced}
	alive := func(id NodeID) bool {
		_, found := slices.BinarySearchFunc(nodes, id, func(n WorkNode, id NodeID) int { return cmp.Compare(n.ID, id) })
		return id != "" && found
	}
	if req.BundleIndex >= 0 {
		if req.BundleIndex < len(group.BundleNodes) && alive(group.BundleNodes[req.BundleIndex]) {
			return Choice{Outcome: WorkPlaced, Targets: []Target{{Node: group.BundleNodes[req.BundleIndex], BundleIndex: req.BundleIndex}}}
		}
		return wait
	}
	var targets []Target
	for _, node := range group.BundleNodes {
		if alive(node) && !slices.ContainsFunc(targets, func(t Target) bool { return t.Node == node }) {
			targets = append(targets, Target{Node: node, BundleIndex: resources.AnyBundle})
		}
	}
	if len(targets) == 0 {
		return wait
	}
	return Choice{Outcome: WorkPlaced, Targets: targets}
}

// chooseAffinity targets the named node. A soft affinity puts it first when it has room
// and falls back to DEFAULT's order of the others; a hard one waits for the node's room
// and fails when the node is gone or could never hold the work.
func chooseAffinity(req WorkRequest, nodes []WorkNode) Choice {
	i := slices.IndexFunc(nodes, func(n WorkNode) bool { return n.ID == req.NodeID })
	var cause Reason
	var problem string
	fatal, busy := false, false
	switch {
	case i < 0:
		cause, problem, fatal = Reason{Code: ReasonDead}, fmt.Sprintf("node %s is not ALIVE", req.NodeID), true
	case nodes[i].Draining:
		cause, problem = Reason{Code: ReasonDraining}, fmt.Sprintf("node %s is draining", req.NodeID)
	case !req.Resources.IsSubsetOf(nodes[i].Total):
		cause = shortfall(ReasonInsufficientTotal, req.Resources, nodes[i].Total, nodes[i].Total)
		problem, fatal = fmt.Sprintf("node %s can never hold %s (total %s)", req.NodeID, req.Resources, nodes[i].Total), true
	case !req.Resources.IsSubsetOf(nodes[i].Available):
		cause = shortfall(ReasonInsufficientAvailable, req.Resources, nodes[i].Available, nodes[i].Total)
		problem, busy = fmt.Sprintf("node %s does not have %s available now", req.NodeID, req.Resources), true
	}
	here := []Target{{Node: req.NodeID, BundleIndex: resources.AnyBundle}}
	if problem == "" {
		out := Choice{Outcome: WorkPlaced, Targets: here}
		if req.Soft {
			rest := chooseByPolicy(WorkRequest{ID: req.ID, Resources: req.Resources, SpreadThreshold: req.SpreadThreshold}, nodes, req.NodeID)
			out.Targets, out.Later, out.Rejected = append(out.Targets, rest.Targets...), rest.Later, rest.Rejected
		}
		return out
	}
	if req.Soft {
		out := chooseByPolicy(WorkRequest{ID: req.ID, Resources: req.Resources, SpreadThreshold: req.SpreadThreshold}, nodes, req.NodeID)
		out.Rejected = insertRejection(out.Rejected, NodeRejection{Node: req.NodeID, Reason: cause})
		if out.Outcome != WorkPlaced {
			out.Message = problem + "; " + out.Message
		}
		return out
	}
	out := Choice{Cause: cause, Rejected: []NodeRejection{{Node: req.NodeID, Reason: cause}}, Message: "node affinity (soft=false): " + problem}
	switch {
	case fatal:
		out.Outcome = WorkUnschedulable
	case busy:
		out.Outcome, out.Later = WorkNotNow, here
	default:
		out.Outcome = WorkNotNow
	}
	return out
}

func insertRejection(list []NodeRejection, r NodeRejection) []NodeRejection {
	i, _ := slices.BinarySearchFunc(list, r.Node, func(x NodeRejection, id NodeID) int { return cmp.Compare(x.Node, id) })
	return slices.Insert(list, i, r)
}

// shortfall is the reason a node cannot hold request: the first resource (by name) it
// has less of than asked.
func shortfall(code ReasonCode, request, have, total resources.Set) Reason {
	for _, name := range request.Names() {
		if have[name] < request[name] {
			return Reason{Code: code, Resource: name, Want: request[name], Have: have[name], Total: total[name]}
		}
	}
	return Reason{Code: code}
}

// rankedNode is a feasible node with its place in DEFAULT's or SPREAD's order.
type rankedNode struct {
	id        NodeID
	available bool
	softMiss  bool    // fails the soft label selector: after the nodes that match it
	score     float64 // DEFAULT: critical utilisation, 0 below the threshold
	tie       uint64  // DEFAULT: the request-seeded shuffle among equal scores
	position  int     // SPREAD: the place in this round
}

// chooseByPolicy runs DEFAULT or SPREAD over nodes (sorted by id), leaving out skip.
// Stages, cheapest first: draining, then the hard label selector (a map lookup per
// constraint), then totals (infeasible), then what is available now; the nodes left are
// ordered by the soft label selector, then the strategy's score.
func chooseByPolicy(req WorkRequest, nodes []WorkNode, skip NodeID) Choice {
	var out Choice
	var ranked []rankedNode
	active, labelled := 0, 0
	for _, n := range nodes {
		if n.ID == skip {
			continue
		}
		if n.Draining {
			out.Rejected = append(out.Rejected, NodeRejection{Node: n.ID, Reason: Reason{Code: ReasonDraining}})
			continue
		}
		active++
		if reason, rejected := labelRejection(req.LabelSelector, n.Labels); rejected {
			out.Rejected = append(out.Rejected, NodeRejection{Node: n.ID, Reason: reason})
			continue
		}
		labelled++
		if !req.Resources.IsSubsetOf(n.Total) {
			out.Rejected = append(out.Rejected, NodeRejection{Node: n.ID, Reason: shortfall(ReasonInsufficientTotal, req.Resources, n.Total, n.Total)})
			continue
		}
		r := rankedNode{id: n.ID, available: req.Resources.IsSubsetOf(n.Available), softMiss: !req.SoftLabelSelector.Matches(n.Labels)}
		if !r.available {
			out.Rejected = append(out.Rejected, NodeRejection{Node: n.ID, Reason: shortfall(ReasonInsufficientAvailable, req.Resources, n.Available, n.Total)})
		}
		if req.Strategy != WorkSpread {
			r.score = hybridScore(n, cmp.Or(req.SpreadThreshold, DefaultSpreadThreshold))
			r.tie = tieBreak(req.ID, n.ID)
		}
		ranked = append(ranked, r)
	}
	if req.Strategy == WorkSpread && len(ranked) > 0 {
		start := int(req.SpreadCursor % uint64(len(ranked)))
		for i := range ranked {
			ranked[i].position = (i - start + len(ranked)) % len(ranked)
		}
	}
	slices.SortFunc(ranked, func(a, b rankedNode) int {
		if a.softMiss != b.softMiss {
			return cmp.Compare(boolRank(a.softMiss), boolRank(b.softMiss))
		}
		if a.position != b.position {
			return cmp.Compare(a.position, b.position)
		}
		if a.score != b.score {
			return cmp.Compare(a.score, b.score)
		}
		if a.score == 0 {
			return cmp.Compare(a.id, b.id) // packing: the fixed order
		}
		return cmp.Or(cmp.Compare(a.tie, b.tie), cmp.Compare(a.id, b.id))
	})
	for _, r := range ranked {
		t := Target{Node: r.id, BundleIndex: resources.AnyBundle}
		if r.available {
			out.Targets = append(out.Targets, t)
		} else {
			out.Later = append(out.Later, t)
		}
	}
	switch {
	case len(out.Targets) > 0:
		out.Outcome = WorkPlaced
	case active == 0:
		out.Outcome, out.Message = WorkInfeasible, "no ALIVE node that is not draining"
	case labelled == 0:
		out.Outcome = WorkInfeasible
		out.Message = fmt.Sprintf("infeasible: no ALIVE node matches label_selector %s; waiting for a node that does", req.LabelSelector)
	case len(ranked) == 0:
		out.Outcome = WorkInfeasible
		out.Message = fmt.Sprintf("infeasible: no ALIVE node has %s in total; waiting for a node that does", req.Resources)
	default:
		out.Outcome, out.Message = WorkNotNow, fmt.Sprintf("no node has %s available now", req.Resources)
	}
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hybridScore is Ray's hybrid policy score: the node's critical resource utilisation
// (the highest used share of any resource it has), truncated to 0 below threshold so
// that every node under it counts as equally good and work packs in the fixed order.
func hybridScore(n WorkNode, threshold float64) float64 {
	utilisation := 0.0
	for name, total := range n.Total {
		if total <= 0 {
			continue
		}
		used := float64(total-min(n.Available[name], total)) / float64(total)
		utilisation = max(utilisation, used)
	}
	if utilisation < threshold {
		return 0
	}
	return utilisation
}

// tieBreak is the request-seeded shuffle: a hash of the request id and the node id.
func tieBreak(requestID string, node NodeID) uint64 {
	h := fnv.New64a()
	h.Write([]byte(requestID))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return h.Sum64()
}
