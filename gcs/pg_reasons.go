package gcs

import (
	"fmt"
	"sort"
	"strings"

	pb "github.com/raygo-dev/raygo/protos/raygopb"

	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Bounds of a pending row's reasons: a few hundred bytes whatever the cluster's size.
const (
	maxRejectionSummaries = 8
	maxExampleNodes       = 3
)

// summarizeRejections counts the scheduler's per-node reasons by code, most nodes first,
// with the first nodes (by id) of each as examples.
func summarizeRejections(nodeReasons map[placement.NodeID][]placement.Reason) []*pb.RejectionSummary {
	type tally struct {
		code    placement.ReasonCode
		example placement.Reason
		nodes   int
		ids     []placement.NodeID // the smallest ids, sorted
	}
	byCode := map[placement.ReasonCode]*tally{}
	for id, reasons := range nodeReasons {
		for _, r := range reasons {
			t := byCode[r.Code]
			if t == nil {
				t = &tally{code: r.Code}
				byCode[r.Code] = t
			}
			t.nodes++
			at := sort.Search(len(t.ids), func(i int) bool { return t.ids[i] > id })
			if at >= maxExampleNodes {
				continue
			}
			if at == 0 {
				t.example = r
			}
			t.ids = append(t.ids, "")
			copy(t.ids[at+1:], t.ids[at:])
			t.ids[at] = id
			if len(t.ids) > maxExampleNodes {
				t.ids = t.ids[:maxExampleNodes]
			}
		}
	}
	tallies := make([]*tally, 0, len(byCode))
	for _, t := range byCode {
		tallies = append(tallies, t)
	}
	sort.Slice(tallies, func(i, j int) bool {
		if tallies[i].nodes != tallies[j].nodes {
			return tallies[i].nodes > tallies[j].nodes
		}
		return tallies[i].code < tallies[j].code
	})
	if len(tallies) > maxRejectionSummaries {
		tallies = tallies[:maxRejectionSummaries]
	}
	out := make([]*pb.RejectionSummary, len(tallies))
	for i, t := range tallies {
		ids := make([]string, len(t.ids))
		for j, id := range t.ids {
			ids[j] = string(id)
		}
		out[i] = &pb.RejectionSummary{Code: string(t.code), Example: t.example.String(), Nodes: int32(t.nodes), ExampleNodeIds: ids}
	}
	return out
}

// pendingReasonText words a failure for the row: what failed, then the largest reasons
// ("not now: bundle 0 {GPU: 1} fits no node: 1250 nodes (3f2a…, 41bc…, …): GPU
// available 0 < 1").
func pendingReasonText(unschedulable *placement.UnschedulableError, summaries []*pb.RejectionSummary) string {
	const shown = 3
	var b strings.Builder
	b.WriteString(unschedulable.Summary())
	for i, s := range summaries {
		if i == shown {
			rest := 0
			for _, r := range summaries[shown:] {
				rest += int(r.Nodes)
			}
			fmt.Fprintf(&b, "; %d more rejections for other reasons", rest)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if s.Nodes == 1 {
			fmt.Fprintf(&b, "node %s: %s", placement.ShortNodeID(placement.NodeID(s.ExampleNodeIds[0])), s.Example)
			continue
		}
		fmt.Fprintf(&b, "%d nodes (", s.Nodes)
		for j, id := range s.ExampleNodeIds {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(placement.ShortNodeID(placement.NodeID(id)))
		}
		if int(s.Nodes) > len(s.ExampleNodeIds) {
			b.WriteString(", …")
		}
		fmt.Fprintf(&b, "): %s", s.Example)
	}
	return b.String()
}

// pendingCode says which of the pending reasons a scheduling failure is: Infeasible when
// no node could ever hold the group; Fragmented when the cluster has the group's
// resources free in total but not in a shape it can use; NoResources otherwise.
// available is the cluster's free resources in total.
func pendingCode(unschedulable *placement.UnschedulableError, request placement.Request, available resources.Set) pending.Reason {
	if unschedulable.Kind == placement.Infeasible {
		return pending.Infeasible
	}
	sum, err := resources.SumOf(request.Bundles)
	if err == nil && sum.IsSubsetOf(available) {
		return pending.Fragmented
	}
	return pending.NoResources
}
