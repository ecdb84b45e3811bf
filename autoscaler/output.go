package autoscaler

import (
	"slices"
	"strings"
)

// Launch is a number of nodes of one type to request from the provider.
type Launch struct {
	Type  string
	Count int
	// For names the demand the nodes are for: placement group ids, "shape:<resources>"
	// for tasks and actors, "request_resources", "min_workers".
	For []string
}

// GroupIDs returns the placement-group ids among a launch's For names (the others name
// shapes, request_resources and min_workers): the gangs the launch is for.
func GroupIDs(forNames []string) []string {
	var out []string
	for _, name := range forNames {
		if name != ForRequestResources && name != ForMinWorkers && !strings.HasPrefix(name, shapePrefix) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TerminationCause is why the plan terminates a node.
type TerminationCause string

const (
	// CauseIdle: the node was idle longer than its type's idle timeout.
	CauseIdle TerminationCause = "IDLE"
	// CauseMaxWorkers: the type or the cluster has more nodes than max_workers allows.
	CauseMaxWorkers TerminationCause = "MAX_WORKERS"
	// CauseOutdated: the node's type is no longer in the configuration.
	CauseOutdated TerminationCause = "OUTDATED"
)

// Termination is one node to terminate.
type Termination struct {
	NodeID string
	Type   string
	Cause  TerminationCause
}

// Infeasible is demand no node type could ever hold (never launched for), or demand
// held back by a limit (max_workers), with why.
type Infeasible struct {
	// For is the demand, named as in Launch.For.
	For string
	// Reason is one line a user reads in `raygo status`, e.g. "STRICT_PACK of 16 GPUs
	// needs one NVLink island of 16; the largest of any node type is 8".
	Reason string
	// Limited is true when a type could hold the demand but max_workers stops the
	// launch; false when no type could ever hold it.
	Limited bool
}

// Plan is the planner's answer.
type Plan struct {
	Launches     []Launch
	Terminations []Termination
	Infeasible   []Infeasible
}
