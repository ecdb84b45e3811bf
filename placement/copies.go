package placement

import (
	"math"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// CopiesThatFit is how many copies of a bundle that asks for no GPU and no MIG profile
// one node takes together (a PACK or STRICT_PACK group of them on that node alone), by
// the stages that decide such a bundle on one node (filters.go): status, the label
// selectors (every one must match), resources; stage 5 asks nothing of a bundle without
// GPUs. ok is false for a bundle with GPUs or a MIG profile: Schedule alone answers for
// those. It is for callers that ask the same question of many alike nodes (the
// autoscaler's planner, for tens of thousands of planned nodes), where a Schedule per
// node would dominate.
func CopiesThatFit(node Node, bundle resources.Set, selectors ...nodelabel.Selector) (copies int, ok bool) {
	for name, amount := range bundle {
		if amount > 0 && (name == resources.GPU || mig.IsResource(name)) {
			return 0, false
		}
	}
	if _, dead := statusRejection(&snapshotNode{alive: node.Alive, draining: node.Draining}); dead {
		return 0, true
	}
	for _, selector := range selectors {
		if _, mismatch := labelRejection(selector, node.Labels); mismatch {
			return 0, true
		}
	}
	copies = math.MaxInt
	for name, need := range bundle {
		if need > 0 {
			copies = min(copies, int(node.Available[name]/need))
		}
	}
	if copies == math.MaxInt { // no positive amount: not a valid bundle
		return 0, true
	}
	return copies, true
}
