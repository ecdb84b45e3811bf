package placement

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// MaxBundles is the most bundles one placement group may request.
const MaxBundles = 10000

// Strategy is a placement group strategy, spelled as in Ray's API.
type Strategy string

const (
	// StrategyPack puts the bundles on as few nodes as possible, best effort: one node if
	// any can hold them all, otherwise it spills over to more nodes.
	StrategyPack Strategy = "PACK"
	// StrategySpread puts each bundle on a node of its own while such nodes remain, then
	// reuses nodes, best effort.
	StrategySpread Strategy = "SPREAD"
	// StrategyStrictPack puts every bundle on one node, or fails.
	StrategyStrictPack Strategy = "STRICT_PACK"
	// StrategyStrictSpread puts every bundle on a distinct node, or fails.
	StrategyStrictSpread Strategy = "STRICT_SPREAD"
)

// ParseStrategy converts the wire name. The empty string is PACK, Ray's default.
func ParseStrategy(name string) (Strategy, error) {
	switch strategy := Strategy(name); strategy {
	case "":
		return StrategyPack, nil
	case StrategyPack, StrategySpread, StrategyStrictPack, StrategyStrictSpread:
		return strategy, nil
	default:
		return "", fielderr.New(ErrUnknownStrategy, "strategy",
			"must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got %s", strconv.Quote(name))
	}
}

// RequestSpec is a placement group request as it arrives on the wire (Ray's
// placement_group() arguments): float amounts and selector strings, not yet checked.
type RequestSpec struct {
	Bundles             []map[string]float64
	Strategy            string
	BundleLabelSelector []map[string]string
	// Topology is "" (STRICT_PACK keeps whole GPUs in one NVLink island) or "node"
	// (Ray's one-node STRICT_PACK): CreatePlacementGroupRequest.topology.
	Topology string
}

// Request is a checked placement group request in scheduling form.
type Request struct {
	// Bundles are the group's resource bundles, indexed as the user gave them.
	Bundles []resources.Set
	// Strategy is how bundles share nodes. The zero value means PACK, Ray's default.
	Strategy Strategy
	// BundleLabelSelectors is empty, or holds one selector per bundle (an empty selector
	// matches every node).
	BundleLabelSelectors []nodelabel.Selector
	// Topology is TopologyIsland (the zero value: raygo's GPU topology) or TopologyNode
	// (Ray's node-level meaning of the strategy; see Topology).
	Topology Topology
	// PlacedBundles maps the index of every bundle the group already holds to its node;
	// Schedule places only the others. Empty for a new group. When a node dies, the GCS
	// drops that node's bundles from this map and schedules again, so only the lost
	// bundles move:
	//   - STRICT_SPREAD: nodes in the map are excluded (ReasonAlreadyHoldsBundle).
	//   - STRICT_PACK: if the map is not empty, the lost bundles may only go to the node
	//     holding the others (ReasonNotGroupNode elsewhere), or, for a group kept in a
	//     multi-node NVLink domain, to the nodes of that domain (ReasonNotGroupDomain).
	//   - PACK prefers nodes in the map; SPREAD prefers nodes not in it.
	PlacedBundles map[int]NodeID
	// Workload is the workload the fragmentation scoring stage measures against
	// (fragmentation_score.go): among feasible nodes, prefer the one whose expected
	// fragmentation grows least. Nil: no such stage. Read only.
	Workload *WorkloadDistribution
}

// ParseRequest checks a wire request with Ray's rules and converts it. The first
// problem found (in field order) is returned as a *fielderr.Error naming the field, e.g.
// `bundles[2]: a bundle must request at least one resource with a positive amount`.
func ParseRequest(spec RequestSpec) (Request, error) {
	if err := checkBundleCount(len(spec.Bundles)); err != nil {
		return Request{}, err
	}
	request := Request{Bundles: make([]resources.Set, len(spec.Bundles))}
	for i, wireBundle := range spec.Bundles {
		bundle, err := resources.ParseBundle(wireBundle)
		if err != nil {
			return Request{}, fielderr.WithPrefix(err, bundleField(i))
		}
		request.Bundles[i] = bundle
	}
	if _, err := resources.SumOf(request.Bundles); err != nil {
		return Request{}, fielderr.WithPrefix(err, "bundles")
	}
	strategy, err := ParseStrategy(spec.Strategy)
	if err != nil {
		return Request{}, err
	}
	request.Strategy = strategy
	topology, err := ParseTopology(spec.Topology)
	if err != nil {
		return Request{}, err
	}
	request.Topology = topology
	if err := checkSelectorCount(len(spec.BundleLabelSelector), len(spec.Bundles)); err != nil {
		return Request{}, err
	}
	if len(spec.BundleLabelSelector) > 0 {
		request.BundleLabelSelectors = make([]nodelabel.Selector, len(spec.BundleLabelSelector))
		for i, wireSelector := range spec.BundleLabelSelector {
			selector, err := nodelabel.ParseSelector(wireSelector)
			if err != nil {
				return Request{}, fielderr.WithPrefix(err, selectorField(i))
			}
			request.BundleLabelSelectors[i] = selector
		}
	}
	return request, nil
}

// Validate applies the same rules as ParseRequest to a Request built directly, plus the
// consistency of PlacedBundles. Schedule calls it.
func (r Request) Validate() error {
	if err := checkBundleCount(len(r.Bundles)); err != nil {
		return err
	}
	for i, bundle := range r.Bundles {
		if err := resources.CheckSet(bundle); err != nil {
			return fielderr.WithPrefix(err, bundleField(i))
		}
		if err := resources.CheckBundle(bundle); err != nil {
			return fielderr.WithPrefix(err, bundleField(i))
		}
	}
	if _, err := resources.SumOf(r.Bundles); err != nil {
		return fielderr.WithPrefix(err, "bundles")
	}
	if _, err := ParseStrategy(string(r.Strategy)); err != nil {
		return err
	}
	if _, err := ParseTopology(string(r.Topology)); err != nil {
		return err
	}
	if err := checkSelectorCount(len(r.BundleLabelSelectors), len(r.Bundles)); err != nil {
		return err
	}
	for i, selector := range r.BundleLabelSelectors {
		if err := selector.Check(); err != nil {
			return fielderr.WithPrefix(err, selectorField(i))
		}
	}
	return r.checkPlacedBundles()
}

// strategy returns the strategy with the zero value resolved to PACK.
func (r Request) strategy() Strategy {
	if r.Strategy == "" {
		return StrategyPack
	}
	return r.Strategy
}

func (r Request) selectorOf(bundleIndex int) nodelabel.Selector {
	if len(r.BundleLabelSelectors) == 0 {
		return nil
	}
	return r.BundleLabelSelectors[bundleIndex]
}

func (r Request) checkPlacedBundles() error {
	if len(r.PlacedBundles) == 0 {
		return nil
	}
	indices := make([]int, 0, len(r.PlacedBundles))
	for index := range r.PlacedBundles {
		indices = append(indices, index)
	}
	sort.Ints(indices)
	holderOf := make(map[NodeID]int, len(indices))
	for _, index := range indices {
		field := fmt.Sprintf("placed_bundles[%d]", index)
		node := r.PlacedBundles[index]
		if index < 0 || index >= len(r.Bundles) {
			return fielderr.New(ErrInvalidPlacedBundles, field, "bundle index out of range, the group has %d bundles", len(r.Bundles))
		}
		if node == "" {
			return fielderr.New(ErrInvalidPlacedBundles, field, "node id must not be empty")
		}
		other, shared := holderOf[node]
		switch {
		case r.strategy() == StrategyStrictSpread && shared:
			return fielderr.New(ErrInvalidPlacedBundles, field,
				"STRICT_SPREAD bundles must be on distinct nodes, bundle %d is also on node %s", other, node)
		// Kept in NVLink islands, a STRICT_PACK group may span the nodes of one NVLink
		// domain: Schedule checks that against the snapshot.
		case r.strategy() == StrategyStrictPack && r.Topology == TopologyNode && !shared && len(holderOf) > 0:
			return fielderr.New(ErrInvalidPlacedBundles, field,
				"STRICT_PACK bundles must share one node, bundle %d is on node %s and this one on node %s",
				indices[0], r.PlacedBundles[indices[0]], node)
		}
		if !shared {
			holderOf[node] = index
		}
	}
	return nil
}

func checkBundleCount(count int) error {
	if count == 0 {
		return fielderr.New(ErrNoBundles, "bundles", "must be a non-empty list")
	}
	if count > MaxBundles {
		return fielderr.New(ErrTooManyBundles, "bundles", "at most %d bundles are allowed, got %d", MaxBundles, count)
	}
	return nil
}

func checkSelectorCount(selectors, bundles int) error {
	if selectors != 0 && selectors != bundles {
		return fielderr.New(nodelabel.ErrInvalidSelector, "bundle_label_selector",
			"must have one entry per bundle (%d), got %d", bundles, selectors)
	}
	return nil
}

func bundleField(index int) string   { return fmt.Sprintf("bundles[%d]", index) }
func selectorField(index int) string { return fmt.Sprintf("bundle_label_selector[%d]", index) }
