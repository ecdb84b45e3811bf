package placement

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Sentinel errors. Validation errors are *fielderr.Error values whose Err is one of the
// request sentinels below or of the resource and label vocabulary (internal/resources,
// internal/nodelabel), so callers can test with errors.Is (every one wraps
// ErrInvalidRequest) and still print a message that names the field.
var (
	// ErrInvalidRequest is wrapped by every request validation error, those of the
	// resource and label vocabulary included; the GCS maps it to gRPC InvalidArgument.
	// It is fielderr.ErrInvalid under the scheduler's name.
	ErrInvalidRequest = fielderr.ErrInvalid

	// ErrNoBundles: the request has no bundles.
	ErrNoBundles = fmt.Errorf("%w: no bundles", ErrInvalidRequest)
	// ErrTooManyBundles: the request has more than MaxBundles bundles.
	ErrTooManyBundles = fmt.Errorf("%w: too many bundles", ErrInvalidRequest)
	// ErrUnknownStrategy: the strategy is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD.
	ErrUnknownStrategy = fmt.Errorf("%w: unknown strategy", ErrInvalidRequest)
	// ErrInvalidPlacedBundles: Request.PlacedBundles names a bundle that does not exist,
	// an empty node, or a layout its strategy forbids.
	ErrInvalidPlacedBundles = fmt.Errorf("%w: invalid placed bundles", ErrInvalidRequest)
	// ErrUnknownTopology: Request.Topology is not "" or "node".
	ErrUnknownTopology = fmt.Errorf("%w: unknown topology", ErrInvalidRequest)
	// ErrInvalidMIGState: a MIG GPU's slot map given to the allocator breaks the geometry
	// (unknown model or profile, invalid start, overlapping instances, more than 7
	// compute slices, ...), or a step given to MIGGPU.Apply does not fit the GPU as it is.
	ErrInvalidMIGState = errors.New("placement: invalid MIG GPU state")
	// ErrMIGProfileUnsupported: no GPU given to PlanMIG has a model with the profile; only
	// other GPUs would help. It wraps ErrInfeasible.
	ErrMIGProfileUnsupported = fmt.Errorf("%w: no MIG GPU has the profile", ErrInfeasible)
	// ErrMIGNoRoom: GPUs with the profile exist, but held instances leave no valid start
	// on any of them, even with every idle instance destroyed. It wraps ErrNotNow.
	ErrMIGNoRoom = fmt.Errorf("%w: no room for the MIG profile", ErrNotNow)
	// errNoMIGGPUs: the scheduler asked a node without MIG GPUs for a MIG profile.
	errNoMIGGPUs = fmt.Errorf("%w: the node has no MIG GPUs", ErrMIGProfileUnsupported)

	// ErrInvalidSnapshot is wrapped by NewSnapshot's errors: the caller's node table is
	// inconsistent (duplicate ids, available above total, ...).
	ErrInvalidSnapshot = errors.New("placement: invalid snapshot")
	// ErrUnknownNode: a node id given to Schedule, Reserve or Release is not in the snapshot.
	ErrUnknownNode = errors.New("placement: node not in snapshot")
	// ErrInsufficientResources: Reserve would take more than a node (or GPU) has
	// available, or Release would give back more than a node's total (or a whole GPU).
	ErrInsufficientResources = errors.New("placement: insufficient resources")
	// ErrInvalidGPUAssignment: a plan given to Reserve or Release has GPU indices that
	// do not match its bundle (a whole-GPU bundle needs as many distinct indices as
	// GPUs, a fractional one exactly one, others none) or its node (unknown index, or
	// indices on a node that lists no GPUs).
	ErrInvalidGPUAssignment = errors.New("placement: invalid GPU assignment")
	// ErrInternal: the scheduler contradicted itself (a bug); the decision is refused
	// rather than returned half made.
	ErrInternal = errors.New("placement: internal error")

	// ErrInfeasible is what an *UnschedulableError of kind Infeasible unwraps to.
	ErrInfeasible = errors.New("placement: infeasible")
	// ErrNotNow is what an *UnschedulableError of kind NotNow unwraps to.
	ErrNotNow = errors.New("placement: not schedulable now")
)

// UnschedulableKind separates requests that wait for capacity from requests that the
// cluster as it is could never hold.
type UnschedulableKind int

const (
	// Infeasible: even with every node's resources free, no set of today's eligible nodes
	// (alive, not draining, matching the label selectors) can hold the group. Only new or
	// different nodes help; this is the demand the autoscaler scales for.
	Infeasible UnschedulableKind = iota + 1
	// NotNow: the group would fit if resources held by other groups and tasks were freed.
	NotNow
)

func (k UnschedulableKind) String() string {
	switch k {
	case Infeasible:
		return "infeasible"
	case NotNow:
		return "not now"
	default:
		return fmt.Sprintf("UnschedulableKind(%d)", int(k))
	}
}

// UnschedulableError is Schedule's typed failure: a well-formed request that no node
// set can take, with why each node was rejected. It is not bad input: the GCS keeps
// the group PENDING with this reason. Use errors.As to get it, or errors.Is with
// ErrInfeasible / ErrNotNow.
type UnschedulableError struct {
	Kind     UnschedulableKind
	Strategy Strategy
	// BundleIndex is the index (in Request.Bundles) of the bundle that fits no node, or
	// -1 when the group failed as a whole: STRICT_PACK's sum, or STRICT_SPREAD short of
	// distinct nodes.
	BundleIndex int
	// Demand is what no node could hold: the bundle, or for STRICT_PACK the sum of the
	// bundles being placed; nil when STRICT_SPREAD is short of distinct nodes.
	Demand resources.Set
	// IslandGPUs is, for a STRICT_PACK group kept inside one NVLink island, how many
	// whole GPUs that island needs (free now for NotNow, in total for Infeasible): the
	// autoscaler launches a node type with an island at least this large. 0 otherwise.
	IslandGPUs int
	// NodeReasons says, for every node that was rejected for Demand, why. For NotNow they
	// are computed against available resources, for Infeasible against totals. It is
	// empty when the cluster has no nodes, and for STRICT_SPREAD short of distinct nodes
	// it holds only the nodes that are not eligible.
	NodeReasons map[NodeID][]Reason

	// summary names what failed ("bundle 0 {GPU: 16} fits no node"); Error() appends the
	// reasons. The full message is built on demand: failures are a hot path for a busy
	// cluster and the message is read far less often than it is produced.
	summary string
}

func (e *UnschedulableError) Error() string {
	if len(e.NodeReasons) == 0 {
		return e.Kind.String() + ": " + e.summary
	}
	return e.Kind.String() + ": " + e.summary + ": " + summarizeNodeReasons(e.NodeReasons)
}

// Summary is Error() without the node reasons: the kind and what failed ("not now:
// bundle 0 {GPU: 1} fits no node"), for callers that word the reasons themselves.
func (e *UnschedulableError) Summary() string { return e.Kind.String() + ": " + e.summary }

// Unwrap returns ErrInfeasible or ErrNotNow.
func (e *UnschedulableError) Unwrap() error {
	if e.Kind == Infeasible {
		return ErrInfeasible
	}
	return ErrNotNow
}

// Limits of the human summary of node reasons; the full detail is in NodeReasons.
const (
	maxReasonGroupsInMessage = 3
	maxNodeIDsPerReasonGroup = 2
)

// summarizeNodeReasons groups nodes rejected for the same reasons, largest group first:
// "1250 nodes (3f2a…, 41bc…, …): GPU total 8 < 16; node 9e0d…: draining".
func summarizeNodeReasons(nodeReasons map[NodeID][]Reason) string {
	ids := make([]NodeID, 0, len(nodeReasons))
	for id := range nodeReasons {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	// Nodes are grouped by their Reason values (comparable, so no formatting per node);
	// the rare node with more reasons than fit the key is grouped by its text.
	type reasonsKey struct {
		count    int
		reasons  [3]Reason
		longText string
	}
	type reasonGroup struct {
		reasons []Reason
		nodes   []NodeID
	}
	var groups []*reasonGroup
	byKey := make(map[reasonsKey]*reasonGroup)
	for _, id := range ids {
		reasons := nodeReasons[id]
		key := reasonsKey{count: len(reasons)}
		if len(reasons) <= len(key.reasons) {
			copy(key.reasons[:], reasons)
			for i := range key.reasons {
				if key.reasons[i].Code == ReasonInsufficientAvailable {
					key.reasons[i].Total = 0 // not shown: nodes of different sizes group together
				}
			}
		} else {
			key.longText = joinReasons(reasons)
		}
		group := byKey[key]
		if group == nil {
			group = &reasonGroup{reasons: reasons}
			byKey[key] = group
			groups = append(groups, group)
		}
		group.nodes = append(group.nodes, id)
	}
	sort.SliceStable(groups, func(i, j int) bool { return len(groups[i].nodes) > len(groups[j].nodes) })

	var b strings.Builder
	omittedNodes := 0
	for i, group := range groups {
		if i >= maxReasonGroupsInMessage {
			omittedNodes += len(group.nodes)
			continue
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if len(group.nodes) == 1 {
			fmt.Fprintf(&b, "node %s: %s", ShortNodeID(group.nodes[0]), joinReasons(group.reasons))
			continue
		}
		fmt.Fprintf(&b, "%d nodes (", len(group.nodes))
		for j, id := range group.nodes {
			if j == maxNodeIDsPerReasonGroup {
				b.WriteString(", …")
				break
			}
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(ShortNodeID(id))
		}
		fmt.Fprintf(&b, "): %s", joinReasons(group.reasons))
	}
	if omittedNodes > 0 {
		fmt.Fprintf(&b, "; %d more nodes with other reasons", omittedNodes)
	}
	return b.String()
}

func joinReasons(reasons []Reason) string {
	parts := make([]string, len(reasons))
	for i, reason := range reasons {
		parts[i] = reason.String()
	}
	return strings.Join(parts, ", ")
}

// ShortNodeID abbreviates Ray's 56-hex-digit node ids for messages: "3f2a9c1e…".
func ShortNodeID(id NodeID) string {
	const keep = 8
	if len(id) <= keep+4 {
		return string(id)
	}
	return string(id[:keep]) + "…"
}
