package autoscaler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// scanOpen is open as a plain scan of the pool (the definition the fit indexes speed up):
// running nodes in pool order, then the others newest first, those on which some
// distinct bundle of the demand fits by amounts, at most maxOpenNodes.
func scanOpen(p *pool, d *demand, maxKind nodeKind) []placement.NodeID {
	var ids []placement.NodeID
	consider := func(node *poolNode) {
		if node.closed || len(ids) == maxOpenNodes {
			return
		}
		for _, bundle := range d.distinct {
			if bundle.IsSubsetOf(node.row.Available) {
				ids = append(ids, node.row.ID)
				return
			}
		}
	}
	for i := range p.nodes {
		if p.nodes[i].kind == kindRunning {
			consider(&p.nodes[i])
		}
	}
	if maxKind == kindRunning {
		return ids
	}
	for i := len(p.nodes) - 1; i >= 0; i-- {
		if p.nodes[i].kind != kindRunning {
			consider(&p.nodes[i])
		}
	}
	return ids
}

// TestOpenMatchesScan: the fit indexes give the nodes a scan gives, in its order, while
// nodes are added and their free capacity shrinks.
func TestOpenMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := benchTypeCatalog()
	p := newPool()
	var demands []*demand
	for i := range 12 {
		bundles := []resources.Set{benchBundles[rng.IntN(len(benchBundles))]}
		if i%3 == 0 {
			bundles = append(bundles, benchShapes[rng.IntN(len(benchShapes))])
		}
		demands = append(demands, newDemand(fmt.Sprint(i), placement.Request{Bundles: bundles}, 1, false))
	}
	for step := range 3000 {
		switch rng.IntN(3) {
		case 0: // a new node, running or planned
			kind := []nodeKind{kindRunning, kindLaunching, kindPlanned}[rng.IntN(3)]
			typ := &types[rng.IntN(len(types))]
			p.add(NewNode(placement.NodeID(fmt.Sprintf("n%05d", step)), typ), kind, typ.Name)
		case 1: // a node loses some of its free capacity
			if len(p.nodes) == 0 {
				continue
			}
			node := &p.nodes[rng.IntN(len(p.nodes))]
			available := make(resources.Set)
			for name, amount := range node.row.Available {
				available[name] = amount * resources.Amount(rng.IntN(3)) / 2 / 1000 * 1000
				available[name] = min(available[name], amount)
			}
			node.row.Available = available
			node.free = p.vectorInto(node.free, available)
			node.closed = available.IsZero()
		default:
			d := demands[rng.IntN(len(demands))]
			kind := []nodeKind{kindRunning, kindPlanned}[rng.IntN(2)]
			rows, positions := p.open(d, kind)
			var got []placement.NodeID
			for i, row := range rows {
				got = append(got, row.ID)
				if p.nodes[positions[i]].row.ID != row.ID {
					t.Fatalf("step %d: position %d is not row %s", step, positions[i], row.ID)
				}
			}
			if want := scanOpen(p, d, kind); !slices.Equal(got, want) {
				t.Fatalf("step %d, demand %v: open gives %v, a scan %v", step, d.request.Bundles, got, want)
			}
		}
	}
}
