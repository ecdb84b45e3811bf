package autoscaler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// infeasibleReason says in one line why no node type could ever hold the demand, for
// `raygo status`. The checks go from the most specific cause to placement's own summary.
func (p *planner) infeasibleReason(d *demand, typeErr func(*NodeType) error) string {
	if len(p.sortedTypes) == 0 {
		return "no node types are configured"
	}
	request := d.request
	// STRICT_PACK of whole GPUs: one NVLink island must hold them all.
	if request.Strategy == placement.StrategyStrictPack {
		island := 0
		for _, t := range p.sortedTypes {
			var unschedulable *placement.UnschedulableError
			if errors.As(typeErr(t), &unschedulable) && unschedulable.IslandGPUs > island {
				island = unschedulable.IslandGPUs
			}
		}
		if largest := p.largestIsland(); island > largest {
			return fmt.Sprintf("STRICT_PACK of %d GPUs needs one NVLink island of %d GPUs; the largest of any node type is %d",
				island, island, largest)
		}
	}
	for index, bundle := range request.Bundles {
		what := "the shape"
		if !d.shape {
			what = fmt.Sprintf("bundle %d", index)
		}
		if len(request.BundleLabelSelectors) > 0 && len(request.BundleLabelSelectors[index]) > 0 {
			selector := request.BundleLabelSelectors[index]
			matched := false
			for _, t := range p.sortedTypes {
				matched = matched || selector.Matches(NewNode("template", t).Labels)
			}
			if !matched {
				return fmt.Sprintf("%s's label selector %s matches no node type's labels", what, selector)
			}
		}
		for _, name := range bundle.Names() {
			most := p.most(name)
			if bundle[name] <= most {
				continue
			}
			if profile, ok := strings.CutPrefix(name, countedMIGPrefix); ok {
				return fmt.Sprintf("%s asks for MIG profile %s, which no node type offers", what, profile)
			}
			return fmt.Sprintf("%s asks for %s %s; the most any node type has is %s", what, name, bundle[name], most)
		}
	}
	if request.Strategy == placement.StrategyStrictPack && len(request.Bundles) > 1 {
		sum, err := resources.SumOf(request.Bundles)
		if err == nil {
			for _, name := range sum.Names() {
				if most := p.most(name); sum[name] > most {
					return fmt.Sprintf("STRICT_PACK needs %s %s on one node; the most any node type has is %s", name, sum[name], most)
				}
			}
		}
	}
	var unschedulable *placement.UnschedulableError
	if errors.As(typeErr(p.sortedTypes[0]), &unschedulable) {
		return "no node type could hold it: " + unschedulable.Summary()
	}
	return "no node type could hold it"
}

// most is the largest amount of a resource one node of any type offers.
func (p *planner) most(name string) resources.Amount {
	var most resources.Amount
	for _, t := range p.sortedTypes {
		most = max(most, countedMIG(t.Resources)[name])
	}
	return most
}

// largestIsland is the most GPUs one NVLink island of any node type holds: its largest
// listed island, or all its GPUs when it lists none.
func (p *planner) largestIsland() int {
	largest := 0
	for _, t := range p.sortedTypes {
		if len(t.GPUIslands) == 0 {
			largest = max(largest, int(t.Resources[resources.GPU]/resources.AmountScale))
		}
		for _, size := range t.GPUIslands {
			largest = max(largest, size)
		}
	}
	return largest
}
