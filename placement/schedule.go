package placement

import (
	"fmt"
	"sort"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// Schedule decides where the bundles of one placement group go. It returns a Plan with
// a node (and, on nodes listing their GPUs, the GPUs) for every bundle not in
// request.PlacedBundles, or an *UnschedulableError
// (Infeasible or NotNow, with per-node reasons), or a validation error (*fielderr.Error,
// wrapping ErrInvalidRequest), or an error wrapping ErrUnknownNode when
// request.PlacedBundles names a node the snapshot lacks. It never returns part of a
// group. It reads the snapshot and changes nothing: the caller reserves the plan
// (Snapshot.Reserve) once the raylets have prepared it.
//
// The decision is deterministic: the same snapshot and request give the same answer,
// so a decision can be replayed from a log.
func Schedule(snapshot *Snapshot, request Request) (Plan, error) {
	if err := request.Validate(); err != nil {
		return Plan{}, err
	}
	d, err := newDecision(snapshot, &request)
	if err != nil {
		return Plan{}, err
	}
	if len(d.bundles) == 0 {
		return Plan{}, nil
	}
	now := d.newAttempt(viewAvailable)
	failure := d.place(now)
	if now.broken != nil {
		return Plan{}, now.broken
	}
	if failure == nil {
		return d.plan(now), nil
	}
	// Infeasible or not now? Place the group the same way with every node idle. If even
	// that fails, freeing capacity would not help this scheduler: only new or different
	// nodes can. Running the same strategy (rather than a separate feasibility test)
	// keeps the two answers consistent: a NotNow group is one that freed capacity lets
	// through.
	idle := d.newAttempt(viewCapacity)
	idleFailure := d.place(idle)
	if idle.broken != nil {
		return Plan{}, idle.broken
	}
	if idleFailure != nil {
		return Plan{}, d.unschedulable(Infeasible, idleFailure)
	}
	return Plan{}, d.unschedulable(NotNow, failure)
}

// decision is the state of one Schedule call, built once per request: the request in
// dense form (bundles as vectors over the resources it names) and the feasibility
// stages that do not change while the plan grows (filters.go, stages 1-3).
type decision struct {
	snapshot *Snapshot
	request  *Request
	strategy Strategy

	// resources are the resources the decision reads, in scoring priority order (GPU
	// first): every resource a bundle to place asks for, plus GPU when the cluster has
	// any, so bundles without GPUs can steer clear of idle GPUs.
	resources []decisionResource
	// bundles are the bundles to place, in placement order: GPU-heavy first.
	bundles []bundleDemand
	// bundleRuns are the runs of identical bundles (same demand and selector) in bundles.
	bundleRuns []bundleRun
	// groupSum is the sum of bundles, for STRICT_PACK and PACK's one-node try.
	groupSum        []resources.Amount
	groupSumNonzero []int

	// Per node, indexed like snapshot.nodes.
	// eligible: passes stage 1 (status) and the static part of stage 2 (group rule).
	eligible []bool
	// holdsPlaced: holds one of Request.PlacedBundles.
	holdsPlaced []bool
	// strictPackNode is the node STRICT_PACK is bound to when rescheduling, else -1;
	// strictPackDomain is the multi-node NVLink domain island it is bound to instead
	// (islands mode, the placed bundles are in a domain), else -1.
	strictPackNode   int
	strictPackDomain int32
	// selectors are the distinct label selectors of bundles, with stage 3 precomputed.
	selectors []compiledSelector
	// matchesAllSelectors: the node passes every bundle's selector (for one-node
	// placements); nil when no bundle has a selector.
	matchesAllSelectors []bool

	// GPU topology (gpus.go, islands.go, spread.go).
	// islandMode: the group keeps its whole GPUs inside NVLink islands: STRICT_PACK and
	// PACK, for a group with whole GPUs, on a cluster where some node lists its GPUs,
	// unless Request.Topology is "node".
	islandMode bool
	// hasMIG: some bundle to place asks for a MIG profile (bundleDemand.mig).
	hasMIG bool
	// groupWholeGPUs is how many whole GPUs the bundles to place ask for in all.
	groupWholeGPUs int
	// gpuResource is the index of "GPU" in resources, or -1.
	gpuResource int
	picker      gpuPicker
	// gpuScratch and gpuTrial hold one node's per-GPU free shares while it is tried;
	// pickScratch the GPUs a trial pick chose; islandCounts the islands' free GPUs
	// (simulateFill); islandsSeen the islands a trial's whole GPUs span (gpusFitGroup).
	gpuScratch, gpuTrial []resources.Amount
	pickScratch          []int
	islandCounts         []int
	islandsSeen          []int32
	// hasFractions: some bundle to place asks for a fraction of a GPU.
	hasFractions bool
	// fillIslands is what simulateFill leaves: the islands its whole GPUs need.
	fillIslands int
	// everyNodeList is 0..len(nodes)-1, made on first use.
	everyNodeList []int
	// domainFailures caches domainFillFailure.
	domainFailures map[domainView]*failure
	// fragmentation is the fragmentation stage's scratch (fragmentation_score.go).
	fragmentation fragmentationScratch
}

type decisionResource struct {
	name   string
	column int // snapshot column; -1 when no node has the resource
}

type bundleDemand struct {
	index    int                // in Request.Bundles
	amounts  []resources.Amount // per decision resource
	nonzero  []int              // decision resources with a positive amount
	selector int                // index in decision.selectors, -1 for none
	gpu      gpuRequest
	// mig is the MIG profile's resource name ("nvidia.com/mig-1g.10gb"), or "": not a
	// decision resource, PlanMIG places it (mig_schedule.go).
	mig string
	run int // index in decision.bundleRuns
}

type bundleRun struct {
	positions []int // positions in decision.bundles, consecutive
}

type compiledSelector struct {
	selector nodelabel.Selector
	matches  []bool // per node
}

func newDecision(snapshot *Snapshot, request *Request) (*decision, error) {
	nodeCount := len(snapshot.nodes)
	d := &decision{
		snapshot:         snapshot,
		request:          request,
		strategy:         request.strategy(),
		holdsPlaced:      make([]bool, nodeCount),
		strictPackNode:   -1,
		strictPackDomain: -1,
		picker:           gpuPicker{snapshot: snapshot},
	}
	d.islandMode = snapshot.hasTopology() && groupHasWholeGPUs(request) && request.Topology != TopologyNode &&
		(d.strategy == StrategyPack || d.strategy == StrategyStrictPack)
	if err := d.resolvePlacedBundles(); err != nil {
		return nil, err
	}
	d.collectResources()
	d.collectBundles()
	d.computeStaticFeasibility()
	maxGPUs := 0
	for node := range snapshot.nodes {
		maxGPUs = max(maxGPUs, snapshot.nodes[node].gpuCount)
	}
	d.gpuScratch, d.gpuTrial = make([]resources.Amount, maxGPUs), make([]resources.Amount, maxGPUs)
	return d, nil
}

// groupHasWholeGPUs reports whether any bundle of the group, placed or not, asks for
// whole GPUs: what decides whether STRICT_PACK keeps the group in one NVLink island.
func groupHasWholeGPUs(request *Request) bool {
	for _, bundle := range request.Bundles {
		if bundle["GPU"] >= resources.AmountScale {
			return true
		}
	}
	return false
}

func (d *decision) resolvePlacedBundles() error {
	indices := make([]int, 0, len(d.request.PlacedBundles))
	for index := range d.request.PlacedBundles {
		indices = append(indices, index)
	}
	sort.Ints(indices) // the first unknown node in index order is reported
	for _, index := range indices {
		id := d.request.PlacedBundles[index]
		node, ok := d.snapshot.indexByID[id]
		if !ok {
			return fmt.Errorf("placed_bundles[%d]: node %s: %w", index, id, ErrUnknownNode)
		}
		d.holdsPlaced[node] = true
		if d.strategy != StrategyStrictPack {
			continue
		}
		// STRICT_PACK: one node, or in islands mode the nodes of one NVLink domain.
		domain := int32(-1)
		if d.islandMode {
			domain = d.snapshot.domainIslandOf(node)
		}
		switch {
		case d.strictPackNode < 0:
			d.strictPackNode, d.strictPackDomain = node, domain
		case node == d.strictPackNode:
		case domain >= 0 && domain == d.strictPackDomain:
		default:
			first := indices[0]
			return fielderr.New(ErrInvalidPlacedBundles, fmt.Sprintf("placed_bundles[%d]", index),
				"STRICT_PACK bundles must share one node or one NVLink domain, bundle %d is on node %s and this one on node %s",
				first, d.request.PlacedBundles[first], id)
		}
	}
	return nil
}

// resourcePriority orders resources for bundle sorting and scoring, scarcest first, as
// Ray's SortRequiredResources: GPU, custom resources (by name), object store memory,
// memory, CPU.
func resourcePriority(name string) int {
	switch name {
	case "GPU":
		return 0
	case "object_store_memory":
		return 2
	case "memory":
		return 3
	case "CPU":
		return 4
	default:
		return 1
	}
}

func (d *decision) collectResources() {
	seen := make(map[string]bool)
	var names []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	if _, ok := d.snapshot.columnByName["GPU"]; ok {
		add("GPU")
	}
	for index, bundle := range d.request.Bundles {
		if _, placed := d.request.PlacedBundles[index]; placed {
			continue
		}
		for name, amount := range bundle {
			if amount > 0 && !mig.IsResource(name) {
				add(name)
			}
		}
	}
	sort.Slice(names, func(i, j int) bool {
		pi, pj := resourcePriority(names[i]), resourcePriority(names[j])
		if pi != pj {
			return pi < pj
		}
		return names[i] < names[j]
	})
	d.resources = make([]decisionResource, len(names))
	for r, name := range names {
		column, ok := d.snapshot.columnByName[name]
		if !ok {
			column = -1
		}
		d.resources[r] = decisionResource{name: name, column: column}
	}
	d.gpuResource = d.resourceIndex("GPU")
}

func (d *decision) resourceIndex(name string) int {
	for r, resource := range d.resources {
		if resource.name == name {
			return r
		}
	}
	return -1
}

func (d *decision) collectBundles() {
	resourceCount := len(d.resources)
	toPlace := len(d.request.Bundles) - len(d.request.PlacedBundles)
	amounts := make([]resources.Amount, toPlace*resourceCount) // one backing array for every bundle
	d.bundles = make([]bundleDemand, 0, toPlace)
	d.groupSum = make([]resources.Amount, resourceCount)
	selectorIDs := make(map[string]int)
	for index, bundle := range d.request.Bundles {
		if _, placed := d.request.PlacedBundles[index]; placed {
			continue
		}
		demand := bundleDemand{index: index, selector: -1}
		demand.amounts, amounts = amounts[:resourceCount:resourceCount], amounts[resourceCount:]
		for name, amount := range bundle {
			if amount > 0 && !mig.IsResource(name) {
				demand.amounts[d.resourceIndex(name)] = amount
			}
		}
		demand.mig = migResourceOf(bundle)
		d.hasMIG = d.hasMIG || demand.mig != ""
		for r, amount := range demand.amounts {
			if amount > 0 {
				demand.nonzero = append(demand.nonzero, r)
				d.groupSum[r] += amount
			}
		}
		demand.gpu = gpuRequestOf(bundle["GPU"])
		d.groupWholeGPUs += demand.gpu.whole
		d.hasFractions = d.hasFractions || demand.gpu.fraction > 0
		if selector := d.request.selectorOf(index); len(selector) > 0 {
			key := selector.String()
			id, ok := selectorIDs[key]
			if !ok {
				id = len(d.selectors)
				selectorIDs[key] = id
				d.selectors = append(d.selectors, compiledSelector{selector: selector})
			}
			demand.selector = id
		}
		d.bundles = append(d.bundles, demand)
	}
	for r, amount := range d.groupSum {
		if amount > 0 {
			d.groupSumNonzero = append(d.groupSumNonzero, r)
		}
	}
	// Placement order: scarcest resources first (the amounts are in priority order, so
	// this puts GPU bundles first, the largest first), then by MIG profile and selector
	// so identical bundles are adjacent, then by index so the order is deterministic.
	sort.Slice(d.bundles, func(i, j int) bool {
		a, b := &d.bundles[i], &d.bundles[j]
		for r := range a.amounts {
			if a.amounts[r] != b.amounts[r] {
				return a.amounts[r] > b.amounts[r]
			}
		}
		if a.mig != b.mig {
			return a.mig > b.mig // MIG bundles before those without
		}
		if a.selector != b.selector {
			return a.selector < b.selector
		}
		return a.index < b.index
	})
	for position := range d.bundles {
		last := len(d.bundleRuns) - 1
		if last >= 0 && d.bundles[position-1].sameDemand(&d.bundles[position]) {
			d.bundleRuns[last].positions = append(d.bundleRuns[last].positions, position)
			d.bundles[position].run = last
			continue
		}
		d.bundleRuns = append(d.bundleRuns, bundleRun{positions: []int{position}})
		d.bundles[position].run = last + 1
	}
}

func (b *bundleDemand) sameDemand(other *bundleDemand) bool {
	if b.selector != other.selector || b.mig != other.mig {
		return false
	}
	for r, amount := range b.amounts {
		if other.amounts[r] != amount {
			return false
		}
	}
	return true
}

// totalAt is node's total of decision resource r.
func (d *decision) totalAt(node, r int) resources.Amount {
	column := d.resources[r].column
	if column < 0 {
		return 0
	}
	return d.snapshot.total[node*len(d.snapshot.columnNames)+column]
}

// viewKind is which amounts an attempt places against.
type viewKind int

const (
	// viewAvailable: what each node has free now.
	viewAvailable viewKind = iota + 1
	// viewCapacity: each node's total minus this group's placed bundles, as if nothing
	// else ran on the cluster. Used to tell Infeasible from NotNow.
	viewCapacity
)

// attempt is one run of a strategy against one view: what is left per node as bundles
// are assigned. It reads the snapshot's table directly and records only what differs
// for the few nodes that hold the group's bundles, so a decision allocates per bundle,
// not per node.
type attempt struct {
	snapshot *Snapshot
	view     viewKind
	// base is the snapshot's available (or total) table; columns maps each decision
	// resource to its column in it (-1: no node has it) and stride is the row length.
	base    []resources.Amount
	columns []int
	stride  int
	// groupNodes holds, for every node with one of the group's bundles (placed before
	// or in this attempt), what the group takes there beyond base and how many bundles.
	// hasGroupNode is the same set as a bitset, so scans skip the map for other nodes.
	groupNodes   map[int]*groupNode
	hasGroupNode []uint64
	// nodeOf is the node chosen for each position of decision.bundles, -1 if none yet.
	nodeOf []int
	// gpusOf holds the GPUs (positions on the node) chosen for each position of
	// decision.bundles that got any.
	gpusOf [][]int
	// migSteps holds the MIG step of each position of decision.bundles that asks for a
	// MIG profile; nil until the first.
	migSteps []*MIGStep
	// wholeIsland >= 0 confines whole GPUs to that island (islands.go); else -1.
	wholeIsland int32
	// spread holds SPREAD's scalable-unit and rail choices, made on first use.
	spread *spreadChoices
	// broken is set when an assignment contradicts the check that allowed it: a bug,
	// reported as ErrInternal instead of a plan.
	broken error
}

type groupNode struct {
	taken   []resources.Amount // per decision resource, subtracted from base
	bundles int
	// gpuTaken is the group's share of each of the node's GPUs (nil without GPUs).
	gpuTaken []resources.Amount
	// mig is the node's MIG slot maps with the group's steps applied in this attempt;
	// nil until one of its MIG bundles goes there (attempt.migGPUs).
	mig []MIGGPU
}

func (d *decision) newAttempt(view viewKind) *attempt {
	a := &attempt{
		snapshot:     d.snapshot,
		view:         view,
		base:         d.snapshot.available,
		columns:      make([]int, len(d.resources)),
		stride:       len(d.snapshot.columnNames),
		groupNodes:   make(map[int]*groupNode, len(d.request.PlacedBundles)+len(d.bundles)),
		hasGroupNode: make([]uint64, (len(d.snapshot.nodes)+63)/64),
		nodeOf:       make([]int, len(d.bundles)),
		gpusOf:       make([][]int, len(d.bundles)),
		wholeIsland:  -1,
	}
	if view == viewCapacity {
		a.base = d.snapshot.total
	}
	for r, resource := range d.resources {
		a.columns[r] = resource.column
	}
	for position := range a.nodeOf {
		a.nodeOf[position] = -1
	}
	for index, id := range d.request.PlacedBundles {
		held := a.groupNodeOf(d.snapshot.indexByID[id])
		held.bundles++
		if view != viewCapacity {
			continue // available amounts already exclude the group's placed bundles
		}
		// The placed bundles stay where they are: they are not capacity the rest of the
		// group could use.
		for name, amount := range d.request.Bundles[index] {
			if r := d.resourceIndex(name); r >= 0 && amount > 0 {
				held.taken[r] += amount
			}
		}
	}
	return a
}

func (a *attempt) groupNodeOf(node int) *groupNode {
	held := a.groupNodes[node]
	if held == nil {
		held = &groupNode{taken: make([]resources.Amount, len(a.columns))}
		if gpus := a.snapshot.nodes[node].gpuCount; gpus > 0 {
			held.gpuTaken = make([]resources.Amount, gpus)
		}
		a.groupNodes[node] = held
		a.hasGroupNode[node/64] |= 1 << (node % 64)
	}
	return held
}

// groupNode returns the group's record on node, or nil if it holds none of its bundles.
func (a *attempt) groupNode(node int) *groupNode {
	if a.hasGroupNode[node/64]&(1<<(node%64)) == 0 {
		return nil
	}
	return a.groupNodes[node]
}

// load fills row with what node has left for the group, per decision resource.
func (a *attempt) load(node int, row []resources.Amount) {
	base := a.base[node*a.stride : (node+1)*a.stride]
	for r, column := range a.columns {
		if column < 0 {
			row[r] = 0
		} else {
			row[r] = base[column]
		}
	}
	if held := a.groupNode(node); held != nil {
		for r, taken := range held.taken {
			row[r] = max(row[r]-taken, 0)
		}
	}
}

// loadGPUs fills free with what each of node's GPUs has left for the group: its free
// share (a whole GPU in the capacity view) minus what the group took in this attempt.
// It returns free cut to the node's GPU count.
func (a *attempt) loadGPUs(node int, free []resources.Amount) []resources.Amount {
	_, base := a.snapshot.nodeGPUs(node)
	free = free[:len(base)]
	if a.view == viewCapacity {
		for g := range free {
			free[g] = resources.AmountScale
		}
	} else {
		copy(free, base)
	}
	if held := a.groupNode(node); held != nil {
		for g, taken := range held.gpuTaken {
			free[g] -= taken
		}
	}
	return free
}

// bundlesOn is how many of the group's bundles node holds.
func (a *attempt) bundlesOn(node int) int {
	if held := a.groupNode(node); held != nil {
		return held.bundles
	}
	return 0
}

// assign puts the bundle at position on node: its resources, and on a node that lists
// its GPUs, the GPUs the picker chooses with the strategy's preference. Callers have
// checked that node can take the bundle (GPUs included) in the attempt's state.
func (d *decision) assign(a *attempt, position, node int) {
	bundle := &d.bundles[position]
	a.nodeOf[position] = node
	held := a.groupNodeOf(node)
	if bundle.gpu.any() && held.gpuTaken != nil {
		pref := d.gpuPreferenceFor(a, bundle, node)
		free := a.loadGPUs(node, d.gpuScratch)
		picked, ok := d.picker.pick(node, free, bundle.gpu, &pref, make([]int, 0, max(bundle.gpu.whole, 1)))
		if !ok && a.broken == nil {
			a.broken = fmt.Errorf("%w: bundle %d was placed on node %s, whose GPUs cannot take it", ErrInternal, bundle.index, d.snapshot.nodes[node].id)
		}
		a.gpusOf[position] = picked
		for _, g := range picked {
			held.gpuTaken[g] += bundle.gpu.share()
		}
	}
	d.assignMIG(a, position, node, held)
	for _, r := range bundle.nonzero {
		held.taken[r] += bundle.amounts[r]
	}
	held.bundles++
}

// gpuPreferenceFor is how the strategy wants the bundle's GPUs chosen on node: confined
// to the group's island (islands mode), on the round's target rails (SPREAD).
func (d *decision) gpuPreferenceFor(a *attempt, bundle *bundleDemand, node int) gpuPreference {
	pref := gpuPreference{island: a.wholeIsland}
	if d.strategy == StrategySpread || d.strategy == StrategyStrictSpread {
		pref.rails = d.roundRails(a, bundle, a.bundlesOn(node))
		if held := a.groupNode(node); held != nil {
			pref.groupTaken = held.gpuTaken
		}
	}
	return pref
}

func (d *decision) plan(a *attempt) Plan {
	placements := make([]BundlePlacement, len(d.bundles))
	for position, bundle := range d.bundles {
		node := a.nodeOf[position]
		placement := BundlePlacement{BundleIndex: bundle.index, NodeID: d.snapshot.nodes[node].id}
		if picked := a.gpusOf[position]; len(picked) > 0 {
			gpus, _ := d.snapshot.nodeGPUs(node)
			sort.Ints(picked) // positions follow NVML indices: the indices come out ascending
			placement.GPUIndices = make([]int, len(picked))
			placement.GPUUUIDs = make([]string, len(picked))
			for i, g := range picked {
				placement.GPUIndices[i], placement.GPUUUIDs[i] = gpus[g].index, gpus[g].uuid
			}
		}
		if a.migSteps != nil && a.migSteps[position] != nil {
			// The MIG instance's parent GPU; its UUID is the raylet's to report once
			// carved (the bundle's MIG device UUID).
			step := *a.migSteps[position]
			placement.MIG = &step
			placement.GPUIndices = append(placement.GPUIndices, step.GPU)
			placement.GPUUUIDs = append(placement.GPUUUIDs, "")
			sortGPUsByIndex(placement.GPUIndices, placement.GPUUUIDs)
		}
		placements[position] = placement
	}
	sort.Slice(placements, func(i, j int) bool { return placements[i].BundleIndex < placements[j].BundleIndex })
	return Plan{Placements: placements}
}
