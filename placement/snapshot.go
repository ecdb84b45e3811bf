package placement

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// NodeID identifies a node: Ray's hex node id.
type NodeID string

// Node is one row of the caller's node table, the input to NewSnapshot.
type Node struct {
	ID NodeID
	// Total is what the node has; Available is what is not reserved or in use.
	Total     resources.Set
	Available resources.Set
	// Labels are the node's labels, including nodelabel.NodeID = ID (the caller supplies it).
	Labels map[string]string
	// Alive is false once the GCS has declared the node dead. Dead and draining nodes
	// take no new bundles.
	Alive    bool
	Draining bool

	// GPUs are the node's whole GPUs with their NVLink islands and rails (NodeInfo.gpus),
	// each with what the GCS has not reserved on it (GPU.Available). Empty: the node's
	// GPUs are known only by count, Total["GPU"], and are scheduled as before topology:
	// no GPU indices are chosen (the raylet picks the lowest free ones) and the node
	// counts as one island. When set, Total["GPU"] must equal len(GPUs); a GPU bundle
	// needs both Available["GPU"] and free GPUs here.
	GPUs []GPU
	// NVLinkDomain is the multi-node NVLink domain of the node's GPUs
	// (NodeInfo.nvlink_domain, e.g. one GB200 NVL72 rack): every node with the same
	// non-empty domain is part of ONE NVLink island. Empty: NVLink is node-local.
	NVLinkDomain string
	// MIGGPUs are the node's GPUs in MIG mode with their slot maps (NodeInfo.mig_gpus):
	// the carved instances, held by a bundle or idle. Such a GPU is not a whole GPU: the
	// caller leaves it out of GPUs and of Total["GPU"]. Indices are unique and distinct
	// from those of GPUs. Empty: the node offers no MIG profile.
	MIGGPUs []MIGGPU
}

// Snapshot is the cluster as the scheduler sees it: nodes in id order with their
// resources in a dense table (one column per resource name) so a scheduling decision
// reads arrays, not maps.
//
// Concurrency: Schedule only reads a snapshot, so concurrent Schedule calls are safe;
// Reserve and Release modify it and must not run concurrently with anything else.
type Snapshot struct {
	nodes        []snapshotNode // sorted by id: ties between nodes go to the lower id
	indexByID    map[NodeID]int
	columnByName map[string]int
	columnNames  []string // sorted
	// total and available are row-major: node i, resource column c at i*len(columnNames)+c.
	total     []resources.Amount
	available []resources.Amount

	// GPU topology (topology.go). gpus and gpuFree hold every listed GPU, node by node
	// in id order; node i's are at nodes[i].firstGPU, nodes[i].gpuCount of them. gpuFree
	// is what Reserve and Release change; the rest is fixed.
	gpus    []snapshotGPU
	gpuFree []resources.Amount
	// wholeFree is, per node, the bitmask of its wholly free GPUs (bit g: the GPU at
	// position g), kept with gpuFree so the hot loops count GPUs with popcounts.
	wholeFree []uint64
	islands   []snapshotIsland
	// domainIslands are the islands of multi-node NVLink domains, by first node.
	domainIslands []int32
	// scalableUnits are the distinct values of nodelabel.ScalableUnit ("" for nodes without
	// it), indexed by snapshotNode.scalableUnit.
	scalableUnits []string
	// rails are the distinct known rail numbers, ascending; snapshotGPU.railSlot
	// indexes them, so per-rail counts are dense whatever the numbers.
	rails []int32

	// mig holds, per node, its MIG GPUs with their slot maps (nil without any);
	// Reserve and Release change it (mig_schedule.go).
	mig [][]MIGGPU
}

type snapshotNode struct {
	id       NodeID
	labels   map[string]string
	alive    bool
	draining bool

	firstGPU, gpuCount int
	nvlinkDomain       string
	domainIsland       int32    // the island of its multi-node NVLink domain, or -1
	islands            []int32  // the islands of its GPUs, in GPU order
	islandSizes        []int    // its GPUs in each of islands
	islandMasks        []uint64 // its GPUs in each of islands, as bitmasks
	allGPUs            uint64   // its GPUs, as a bitmask
	largestIsland      int      // GPUs in its largest node-local island
	scalableUnit       int32    // index in Snapshot.scalableUnits
}

// NewSnapshot builds a snapshot from the node table. It copies what it keeps and
// checks consistency: unique non-empty ids, valid names, 0 <= available <= total,
// nodelabel.NodeID (if present) equal to the id, and GPUs as Node.GPUs describes. Errors
// wrap ErrInvalidSnapshot and name the node: `nodes[3].available["GPU"]: 9 exceeds
// total 8`.
func NewSnapshot(nodes []Node) (*Snapshot, error) {
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return nodes[order[a]].ID < nodes[order[b]].ID })

	names := make(map[string]bool)
	for i, node := range nodes {
		if err := checkNode(i, node); err != nil {
			return nil, err
		}
		for name := range node.Total {
			names[name] = true
		}
	}
	for k := 1; k < len(order); k++ {
		if nodes[order[k]].ID == nodes[order[k-1]].ID {
			return nil, fielderr.New(ErrInvalidSnapshot, fmt.Sprintf("nodes[%d].id", order[k]),
				"duplicate node id %s (also nodes[%d])", nodes[order[k]].ID, order[k-1])
		}
	}

	snapshot := &Snapshot{
		nodes:        make([]snapshotNode, len(nodes)),
		indexByID:    make(map[NodeID]int, len(nodes)),
		columnByName: make(map[string]int, len(names)),
		columnNames:  slices.Sorted(maps.Keys(names)),
	}
	for column, name := range snapshot.columnNames {
		snapshot.columnByName[name] = column
	}
	columns := len(snapshot.columnNames)
	snapshot.total = make([]resources.Amount, len(nodes)*columns)
	snapshot.available = make([]resources.Amount, len(nodes)*columns)
	for row, inputIndex := range order {
		node := nodes[inputIndex]
		labels := make(map[string]string, len(node.Labels))
		for key, value := range node.Labels {
			labels[key] = value
		}
		snapshot.nodes[row] = snapshotNode{id: node.ID, labels: labels, alive: node.Alive, draining: node.Draining}
		snapshot.indexByID[node.ID] = row
		for name, amount := range node.Total {
			snapshot.total[row*columns+snapshot.columnByName[name]] = amount
		}
		for name, amount := range node.Available {
			snapshot.available[row*columns+snapshot.columnByName[name]] = amount
		}
	}
	snapshot.buildTopology(nodes, order)
	snapshot.mig = make([][]MIGGPU, len(nodes))
	for row, inputIndex := range order {
		snapshot.mig[row] = cloneMIGGPUs(nodes[inputIndex].MIGGPUs)
	}
	return snapshot, nil
}

func checkNode(index int, node Node) error {
	// Thousands of nodes are checked per snapshot: nothing is formatted or sorted unless
	// a rule fails.
	field := func() string { return fmt.Sprintf("nodes[%d]", index) }
	if node.ID == "" {
		return fielderr.New(ErrInvalidSnapshot, field()+".id", "must not be empty")
	}
	for _, part := range []struct {
		name string
		set  resources.Set
	}{{"total", node.Total}, {"available", node.Available}} {
		if err := resources.CheckSet(part.set); err != nil {
			return snapshotError(fielderr.WithPrefix(err, field()+"."+part.name))
		}
	}
	for name, amount := range node.Available {
		if amount <= node.Total[name] {
			continue
		}
		for _, name := range node.Available.Names() { // the first in name order
			if node.Available[name] > node.Total[name] {
				return fielderr.New(ErrInvalidSnapshot, field()+".available"+resources.Field(name),
					"%s exceeds total %s", node.Available[name], node.Total[name])
			}
		}
	}
	if value, ok := node.Labels[nodelabel.NodeID]; ok && value != string(node.ID) {
		return fielderr.New(ErrInvalidSnapshot, field()+".labels"+nodelabel.Field(nodelabel.NodeID),
			"must equal the node id %s, got %q", node.ID, value)
	}
	if len(node.GPUs) == 0 && len(node.MIGGPUs) == 0 {
		return nil
	}
	if err := checkGPUs(field, node); err != nil {
		return err
	}
	if len(node.MIGGPUs) == 0 {
		return nil
	}
	return checkMIGGPUs(field(), node)
}

// snapshotError re-labels a resource-set check failure as a snapshot error.
func snapshotError(err error) error {
	if fieldErr, ok := err.(*fielderr.Error); ok {
		return &fielderr.Error{Field: fieldErr.Field, Problem: fieldErr.Problem, Err: ErrInvalidSnapshot}
	}
	return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
}

// NumNodes returns how many nodes the snapshot holds, dead ones included.
func (s *Snapshot) NumNodes() int { return len(s.nodes) }

// Nodes returns a copy of every node, in id order.
func (s *Snapshot) Nodes() []Node {
	out := make([]Node, len(s.nodes))
	for i := range s.nodes {
		out[i] = s.nodeAt(i)
	}
	return out
}

// Node returns a copy of one node.
func (s *Snapshot) Node(id NodeID) (Node, bool) {
	index, ok := s.indexByID[id]
	if !ok {
		return Node{}, false
	}
	return s.nodeAt(index), true
}

func (s *Snapshot) nodeAt(index int) Node {
	record := s.nodes[index]
	node := Node{
		ID:           record.id,
		Total:        make(resources.Set),
		Available:    make(resources.Set),
		Labels:       make(map[string]string, len(record.labels)),
		Alive:        record.alive,
		Draining:     record.draining,
		GPUs:         s.nodeGPUsCopy(index),
		NVLinkDomain: record.nvlinkDomain,
		MIGGPUs:      cloneMIGGPUs(s.mig[index]),
	}
	columns := len(s.columnNames)
	for column, name := range s.columnNames {
		if amount := s.total[index*columns+column]; amount != 0 {
			node.Total[name] = amount
		}
		if amount := s.available[index*columns+column]; amount != 0 {
			node.Available[name] = amount
		}
	}
	for key, value := range record.labels {
		node.Labels[key] = value
	}
	return node
}

// ResourceSummary sums total and available resources over alive nodes (draining ones
// included), e.g. for `raygo status` or a utilization target.
func (s *Snapshot) ResourceSummary() (total, available resources.Set) {
	columns := len(s.columnNames)
	totalSums, availableSums := make([]resources.Amount, columns), make([]resources.Amount, columns)
	for index, record := range s.nodes {
		if !record.alive {
			continue
		}
		for column := range columns {
			totalSums[column] += s.total[index*columns+column]
			availableSums[column] += s.available[index*columns+column]
		}
	}
	total, available = make(resources.Set), make(resources.Set)
	for column, name := range s.columnNames {
		if totalSums[column] != 0 {
			total[name] = totalSums[column]
		}
		if availableSums[column] != 0 {
			available[name] = availableSums[column]
		}
	}
	return total, available
}

// MaxAvailable is, per resource, the most any one alive, not draining node has free: an
// upper bound a caller can test a request against before deciding (a bundle above it
// fits no node now), in O(nodes × resources).
func (s *Snapshot) MaxAvailable() resources.Set {
	columns := len(s.columnNames)
	maxima := make([]resources.Amount, columns)
	for index, record := range s.nodes {
		if !record.alive || record.draining {
			continue
		}
		for column := range columns {
			maxima[column] = max(maxima[column], s.available[index*columns+column])
		}
	}
	out := make(resources.Set)
	for column, name := range s.columnNames {
		if maxima[column] != 0 {
			out[name] = maxima[column]
		}
	}
	return out
}

// CannotFitNow reports that some bundle of the request that is not placed yet asks for
// more of a resource than any one usable node has free (maxFree, from MaxAvailable): then
// Schedule would fail now, and a caller holding many pending requests can skip the
// decision. False says nothing. MIG profiles are not resources of the snapshot's table
// and never make it true.
func CannotFitNow(request Request, maxFree resources.Set) bool {
	for i, bundle := range request.Bundles {
		if _, placed := request.PlacedBundles[i]; placed {
			continue
		}
		for name, amount := range bundle {
			if amount > maxFree[name] && !mig.IsResource(name) {
				return true
			}
		}
	}
	return false
}

// Reserve takes the resources of the plan's bundles from the nodes' available amounts,
// and their GPUs (BundlePlacement.GPUIndices) from the GPUs' available amounts, all or
// nothing: if any node is unknown, dead, or short, nothing changes and the error
// (wrapping ErrUnknownNode, ErrInsufficientResources or ErrInvalidGPUAssignment) names
// the node and resource or GPU. A MIG bundle's step (BundlePlacement.MIG) is applied
// to its GPU's slot map: the idle instances it destroys vanish and its instance is
// held; a step that does not fit the map as it is fails with ErrInvalidGPUAssignment
// (and ErrInvalidMIGState). bundles is the request's Bundles, indexed by
// BundlePlacement.BundleIndex. The GCS calls it after a decision so the next decision
// in the same round sees it.
func (s *Snapshot) Reserve(bundles []resources.Set, plan Plan) error {
	demand, err := s.demandByNode(bundles, plan)
	if err != nil {
		return err
	}
	columns := len(s.columnNames)
	for _, node := range demand.nodes {
		if !s.nodes[node].alive {
			return fmt.Errorf("%w: node %s is dead", ErrInsufficientResources, s.nodes[node].id)
		}
		for column, amount := range demand.amounts[node] {
			if available := s.available[node*columns+column]; amount > available {
				return fmt.Errorf("%w: node %s: %s available %s < %s",
					ErrInsufficientResources, s.nodes[node].id, demand.names[column], available, amount)
			}
		}
		gpus, free := s.nodeGPUs(node)
		for position, amount := range demand.gpus[node] {
			if amount > free[position] {
				return fmt.Errorf("%w: node %s: GPU %d available %s < %s",
					ErrInsufficientResources, s.nodes[node].id, gpus[position].index, free[position], amount)
			}
		}
	}
	migAfter, err := s.migAfter(demand, true)
	if err != nil {
		return err
	}
	s.apply(demand, migAfter, -1)
	return nil
}

// Release gives the resources and GPUs of the placements' bundles back to their nodes,
// all or nothing: giving back more than a node's total or a GPU's whole (a double
// release) is an error wrapping ErrInsufficientResources and changes nothing. A MIG
// bundle's instance goes from held to idle at the same slot, for reuse by the same
// profile; an instance that is not held there is an error wrapping
// ErrInvalidGPUAssignment.
func (s *Snapshot) Release(bundles []resources.Set, plan Plan) error {
	demand, err := s.demandByNode(bundles, plan)
	if err != nil {
		return err
	}
	columns := len(s.columnNames)
	for _, node := range demand.nodes {
		for column, amount := range demand.amounts[node] {
			cell := node*columns + column
			if s.available[cell]+amount > s.total[cell] {
				return fmt.Errorf("%w: releasing %s %s on node %s would exceed its total %s (released twice?)",
					ErrInsufficientResources, amount, demand.names[column], s.nodes[node].id, s.total[cell])
			}
		}
		gpus, free := s.nodeGPUs(node)
		for position, amount := range demand.gpus[node] {
			if free[position]+amount > resources.AmountScale {
				return fmt.Errorf("%w: releasing %s of GPU %d on node %s would exceed the whole GPU, %s is free (released twice?)",
					ErrInsufficientResources, amount, gpus[position].index, s.nodes[node].id, free[position])
			}
		}
	}
	migAfter, err := s.migAfter(demand, false)
	if err != nil {
		return err
	}
	s.apply(demand, migAfter, +1)
	return nil
}

// apply takes a checked demand from the nodes (sign -1, Reserve) or gives it back (+1,
// Release), and installs the MIG slot maps computed for it.
func (s *Snapshot) apply(demand nodeDemand, migAfter map[int][]MIGGPU, sign resources.Amount) {
	for node, gpus := range migAfter {
		s.mig[node] = gpus
	}
	columns := len(s.columnNames)
	for _, node := range demand.nodes {
		for column, amount := range demand.amounts[node] {
			s.available[node*columns+column] += sign * amount
		}
		_, free := s.nodeGPUs(node)
		for position, amount := range demand.gpus[node] {
			free[position] += sign * amount
		}
		s.wholeFree[node] = wholeFreeMask(free)
	}
}

// nodeDemand is a plan's resources summed per node, in snapshot columns, and its GPU
// shares summed per GPU of the node.
type nodeDemand struct {
	nodes   []int // node indices in order
	amounts map[int][]resources.Amount
	names   []string
	gpus    map[int][]resources.Amount // per node with GPU indices: per GPU position on the node
	mig     map[int][]migReservation
}

func (s *Snapshot) demandByNode(bundles []resources.Set, plan Plan) (nodeDemand, error) {
	demand := nodeDemand{amounts: make(map[int][]resources.Amount), names: s.columnNames, gpus: make(map[int][]resources.Amount), mig: make(map[int][]migReservation)}
	for _, placement := range plan.Placements {
		if placement.BundleIndex < 0 || placement.BundleIndex >= len(bundles) {
			return nodeDemand{}, fmt.Errorf("placement: plan places bundle %d, the request has %d bundles",
				placement.BundleIndex, len(bundles))
		}
		node, ok := s.indexByID[placement.NodeID]
		if !ok {
			return nodeDemand{}, fmt.Errorf("%w: bundle %d is placed on node %s", ErrUnknownNode, placement.BundleIndex, placement.NodeID)
		}
		amounts := demand.amounts[node]
		if amounts == nil {
			amounts = make([]resources.Amount, len(s.columnNames))
			demand.amounts[node] = amounts
			demand.nodes = append(demand.nodes, node)
		}
		bundle := bundles[placement.BundleIndex]
		for name, amount := range bundle {
			if amount == 0 || mig.IsResource(name) {
				continue // a MIG profile is a slot of a MIG GPU (addMIGDemand), not a column
			}
			column, ok := s.columnByName[name]
			if !ok {
				return nodeDemand{}, fmt.Errorf("%w: node %s: %s available 0 < %s",
					ErrInsufficientResources, placement.NodeID, name, amount)
			}
			amounts[column] += amount
		}
		wholeGPUs, err := s.addMIGDemand(&demand, node, placement, bundle)
		if err != nil {
			return nodeDemand{}, err
		}
		if err := s.addGPUDemand(demand.gpus, node, wholeGPUs, bundle["GPU"]); err != nil {
			return nodeDemand{}, err
		}
	}
	sort.Ints(demand.nodes)
	return demand, nil
}

// addGPUDemand checks one placement's GPU indices against its bundle and node (see
// BundlePlacement.GPUIndices) and adds the bundle's share of each GPU: all of it for
// whole-GPU bundles, the amount for a fractional one.
func (s *Snapshot) addGPUDemand(perNode map[int][]resources.Amount, node int, placement BundlePlacement, amount resources.Amount) error {
	gpus, _ := s.nodeGPUs(node)
	want := 0
	share := amount
	switch {
	case len(gpus) == 0 || amount == 0:
	case amount < resources.AmountScale:
		want = 1
	case amount%resources.AmountScale == 0:
		want, share = int(amount/resources.AmountScale), resources.AmountScale
	default:
		return fmt.Errorf("%w: bundle %d asks %s GPU: amounts above 1 must be whole", ErrInvalidGPUAssignment, placement.BundleIndex, amount)
	}
	if len(placement.GPUIndices) != want {
		what := "lists its GPUs"
		if len(gpus) == 0 {
			what = "lists no GPUs"
		}
		return fmt.Errorf("%w: bundle %d asks %s GPU on node %s, which %s: want %d GPU indices, the plan gives %v",
			ErrInvalidGPUAssignment, placement.BundleIndex, amount, placement.NodeID, what, want, placement.GPUIndices)
	}
	if want == 0 {
		return nil
	}
	shares := perNode[node]
	if shares == nil {
		shares = make([]resources.Amount, len(gpus))
		perNode[node] = shares
	}
	for i, index := range placement.GPUIndices {
		position := gpuPosition(gpus, index)
		if position < 0 {
			return fmt.Errorf("%w: bundle %d: node %s has no GPU %d", ErrInvalidGPUAssignment, placement.BundleIndex, placement.NodeID, index)
		}
		for _, earlier := range placement.GPUIndices[:i] {
			if earlier == index {
				return fmt.Errorf("%w: bundle %d lists GPU %d twice", ErrInvalidGPUAssignment, placement.BundleIndex, index)
			}
		}
		shares[position] += share
	}
	return nil
}

// gpuPosition returns the position of the GPU with NVML index in gpus, or -1.
func gpuPosition(gpus []snapshotGPU, index int) int {
	for position, gpu := range gpus {
		if gpu.index == index {
			return position
		}
	}
	return -1
}
