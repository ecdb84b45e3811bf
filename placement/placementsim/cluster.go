package placementsim

import (
	"errors"
	"fmt"
	"sort"

	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// GroupID names a placement group in a Cluster, in creation order.
type GroupID int

// Group is a placement group the Cluster holds resources for.
type Group struct {
	ID GroupID
	// Request is the group as created (PlacedBundles empty).
	Request placement.Request
	// NodeOf maps each bundle the group holds to its node. After a node death the
	// group holds fewer bundles than it asks for until Reschedule places them again.
	NodeOf map[int]placement.NodeID
	// GPUsOf maps each bundle holding GPU indices (placement.BundlePlacement.GPUIndices)
	// to them.
	GPUsOf map[int][]int
}

// Complete reports whether the group holds every bundle.
func (g *Group) Complete() bool { return len(g.NodeOf) == len(g.Request.Bundles) }

// Cluster is an in-memory stand-in for the GCS's view: a snapshot plus a ledger of
// which group holds what where, kept independently of the snapshot so the two can be
// checked against each other. It is not safe for concurrent use.
type Cluster struct {
	snapshot *placement.Snapshot
	groups   map[GroupID]*Group
	order    []GroupID // live groups, oldest first
	nextID   GroupID
	// baseline is each node's available amounts when it joined: what it must return to
	// once every group is gone (work outside groups is not modeled as changing).
	baseline map[placement.NodeID]resources.Set
	// reserved is the ledger: per alive node, the sum of the bundles held on it.
	reserved map[placement.NodeID]resources.Set
	alive    map[placement.NodeID]bool
	// gpuBaseline and gpuReserved are the same per GPU index, for nodes listing GPUs.
	gpuBaseline map[placement.NodeID]map[int]resources.Amount
	gpuReserved map[placement.NodeID]map[int]resources.Amount
}

// NewCluster starts a cluster from a snapshot, which it takes ownership of.
func NewCluster(snapshot *placement.Snapshot) *Cluster {
	c := &Cluster{
		snapshot:    snapshot,
		groups:      make(map[GroupID]*Group),
		baseline:    make(map[placement.NodeID]resources.Set),
		reserved:    make(map[placement.NodeID]resources.Set),
		alive:       make(map[placement.NodeID]bool),
		gpuBaseline: make(map[placement.NodeID]map[int]resources.Amount),
		gpuReserved: make(map[placement.NodeID]map[int]resources.Amount),
	}
	for _, node := range snapshot.Nodes() {
		c.join(node)
	}
	return c
}

func (c *Cluster) join(node placement.Node) {
	c.baseline[node.ID] = node.Available.Clone()
	c.alive[node.ID] = node.Alive
	if len(node.GPUs) > 0 {
		c.gpuBaseline[node.ID] = make(map[int]resources.Amount, len(node.GPUs))
		for _, gpu := range node.GPUs {
			c.gpuBaseline[node.ID][gpu.Index] = gpu.Available
		}
	}
}

// Snapshot returns the current snapshot. Schedule against it, then Place the plan.
func (c *Cluster) Snapshot() *placement.Snapshot { return c.snapshot }

// Groups returns the live groups, oldest first.
func (c *Cluster) Groups() []*Group {
	out := make([]*Group, len(c.order))
	for i, id := range c.order {
		out[i] = c.groups[id]
	}
	return out
}

// Create schedules a new group and places it. An unschedulable group changes nothing.
func (c *Cluster) Create(request placement.Request) (*Group, placement.Plan, error) {
	plan, err := placement.Schedule(c.snapshot, request)
	if err != nil {
		return nil, placement.Plan{}, err
	}
	group, err := c.Place(request, plan)
	return group, plan, err
}

// Place records a new group from a plan the caller got from Schedule: it checks that
// the plan is a whole gang (every bundle exactly once) and reserves it in the snapshot.
func (c *Cluster) Place(request placement.Request, plan placement.Plan) (*Group, error) {
	if err := checkWholeGang(len(request.Bundles), nil, plan); err != nil {
		return nil, err
	}
	if err := c.reserve(request.Bundles, plan); err != nil {
		return nil, err
	}
	group := &Group{ID: c.nextID, Request: request, NodeOf: make(map[int]placement.NodeID, len(plan.Placements)), GPUsOf: make(map[int][]int)}
	c.nextID++
	group.record(plan)
	c.groups[group.ID] = group
	c.order = append(c.order, group.ID)
	return group, nil
}

// Remove releases every bundle the group holds on alive nodes and forgets it.
func (c *Cluster) Remove(id GroupID) error {
	group, ok := c.groups[id]
	if !ok {
		return fmt.Errorf("placementsim: no group %d", id)
	}
	var held placement.Plan
	for _, index := range sortedIndices(group.NodeOf) {
		node := group.NodeOf[index]
		if c.alive[node] {
			held.Placements = append(held.Placements, placement.BundlePlacement{BundleIndex: index, NodeID: node, GPUIndices: group.GPUsOf[index]})
		}
	}
	if err := c.snapshot.Release(group.Request.Bundles, held); err != nil {
		return fmt.Errorf("placementsim: remove group %d: %w", id, err)
	}
	for _, p := range held.Placements {
		bundle := group.Request.Bundles[p.BundleIndex]
		remaining, err := c.reserved[p.NodeID].Subtract(bundle)
		if err != nil {
			return fmt.Errorf("placementsim: ledger of node %s: %w", p.NodeID, err)
		}
		c.reserved[p.NodeID] = remaining
		for _, index := range p.GPUIndices {
			c.gpuReserved[p.NodeID][index] -= gpuShare(bundle)
		}
	}
	delete(c.groups, id)
	for i, live := range c.order {
		if live == id {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	return nil
}

// KillNode declares a node dead: its bundles are lost and their groups wait for
// Reschedule.
func (c *Cluster) KillNode(id placement.NodeID) error {
	if err := c.updateNode(id, func(node *placement.Node) { node.Alive = false }); err != nil {
		return err
	}
	delete(c.reserved, id)
	delete(c.gpuReserved, id)
	c.alive[id] = false
	for _, group := range c.groups {
		for index, node := range group.NodeOf {
			if node == id {
				delete(group.NodeOf, index)
				delete(group.GPUsOf, index)
			}
		}
	}
	return nil
}

// DrainNode marks a node draining: it keeps its bundles and takes no new ones.
func (c *Cluster) DrainNode(id placement.NodeID) error {
	return c.updateNode(id, func(node *placement.Node) { node.Draining = true })
}

// AddNode adds a node (alive; its Available is its baseline).
func (c *Cluster) AddNode(node placement.Node) error {
	nodes := append(c.snapshot.Nodes(), node)
	snapshot, err := placement.NewSnapshot(nodes)
	if err != nil {
		return err
	}
	c.snapshot = snapshot
	c.join(node)
	return nil
}

func (c *Cluster) updateNode(id placement.NodeID, update func(*placement.Node)) error {
	nodes := c.snapshot.Nodes()
	for i := range nodes {
		if nodes[i].ID == id {
			update(&nodes[i])
			snapshot, err := placement.NewSnapshot(nodes)
			if err != nil {
				return err
			}
			c.snapshot = snapshot
			return nil
		}
	}
	return fmt.Errorf("placementsim: %w: %s", placement.ErrUnknownNode, id)
}

// Reschedule tries to place the lost bundles of every incomplete group, oldest first,
// as the GCS does for RESCHEDULING groups. It returns the errors of groups that still
// wait (typed *placement.UnschedulableError), keyed by group.
func (c *Cluster) Reschedule() (map[GroupID]error, error) {
	waiting := make(map[GroupID]error)
	for _, id := range c.order {
		group := c.groups[id]
		if group.Complete() {
			continue
		}
		request := group.Request
		request.PlacedBundles = make(map[int]placement.NodeID, len(group.NodeOf))
		for index, node := range group.NodeOf {
			request.PlacedBundles[index] = node
		}
		plan, err := placement.Schedule(c.snapshot, request)
		var unschedulable *placement.UnschedulableError
		switch {
		case errors.As(err, &unschedulable):
			waiting[id] = err
			continue
		case err != nil:
			return nil, fmt.Errorf("placementsim: reschedule group %d: %w", id, err)
		}
		if err := checkWholeGang(len(request.Bundles), request.PlacedBundles, plan); err != nil {
			return nil, fmt.Errorf("placementsim: reschedule group %d: %w", id, err)
		}
		if err := c.reserve(request.Bundles, plan); err != nil {
			return nil, fmt.Errorf("placementsim: reschedule group %d: %w", id, err)
		}
		group.record(plan)
	}
	return waiting, nil
}

func (c *Cluster) reserve(bundles []resources.Set, plan placement.Plan) error {
	if err := c.snapshot.Reserve(bundles, plan); err != nil {
		return err
	}
	for _, p := range plan.Placements {
		c.reserved[p.NodeID] = c.reserved[p.NodeID].Add(bundles[p.BundleIndex])
		for _, index := range p.GPUIndices {
			if c.gpuReserved[p.NodeID] == nil {
				c.gpuReserved[p.NodeID] = make(map[int]resources.Amount)
			}
			c.gpuReserved[p.NodeID][index] += gpuShare(bundles[p.BundleIndex])
		}
	}
	return nil
}

// record notes where the plan put the group's bundles.
func (g *Group) record(plan placement.Plan) {
	for _, p := range plan.Placements {
		g.NodeOf[p.BundleIndex] = p.NodeID
		if len(p.GPUIndices) > 0 {
			g.GPUsOf[p.BundleIndex] = append([]int(nil), p.GPUIndices...)
		}
	}
}

// gpuShare is what a bundle holds of each of its GPUs: all of it for whole GPUs, the
// amount for a fraction.
func gpuShare(bundle resources.Set) resources.Amount {
	return min(bundle["GPU"], resources.AmountScale)
}

// checkWholeGang: the plan places exactly the bundles not already placed, each once.
func checkWholeGang(bundleCount int, placed map[int]placement.NodeID, plan placement.Plan) error {
	seen := make(map[int]bool, len(plan.Placements))
	for _, p := range plan.Placements {
		if _, already := placed[p.BundleIndex]; already || seen[p.BundleIndex] || p.BundleIndex < 0 || p.BundleIndex >= bundleCount {
			return fmt.Errorf("placementsim: plan places bundle %d wrongly (placed before, twice or out of range)", p.BundleIndex)
		}
		seen[p.BundleIndex] = true
	}
	if want := bundleCount - len(placed); len(seen) != want {
		return fmt.Errorf("placementsim: partial gang: plan places %d of %d bundles", len(seen), want)
	}
	return nil
}

// CheckInvariants checks DESIGN.md's invariants on the current state and returns every
// violation found:
//   - no double allocation: on every alive node, reserved <= total, and snapshot
//     available + reserved == the node's baseline (the ledger and snapshot agree); the
//     same per GPU: no GPU holds more than a whole GPU's worth of bundles, and a GPU
//     held by a whole-GPU bundle is held by it alone;
//   - groups hold bundles only on alive nodes and a complete group holds all of them;
//   - every held GPU bundle on a node listing GPUs has GPU indices as its amount says
//     (n distinct GPUs for n whole, one for a fraction), none elsewhere;
//   - STRICT_SPREAD bundles are on distinct nodes; STRICT_PACK bundles are on one node,
//     and kept in NVLink islands, every whole GPU of the group is in one island (on one
//     node, or across the nodes of one multi-node NVLink domain);
//   - every held bundle is on a node that matches its label selector.
func (c *Cluster) CheckInvariants() error {
	var problems []error
	nodes := make(map[placement.NodeID]placement.Node)
	clusterHasTopology := false
	for _, node := range c.snapshot.Nodes() {
		nodes[node.ID] = node
		clusterHasTopology = clusterHasTopology || len(node.GPUs) > 0
		if !node.Alive {
			continue
		}
		reserved := c.reserved[node.ID]
		if !reserved.IsSubsetOf(node.Total) {
			problems = append(problems, fmt.Errorf("node %s: double allocation: reserved %s exceeds total %s", node.ID, reserved, node.Total))
		}
		if sum := node.Available.Add(reserved); !sum.Equal(c.baseline[node.ID]) {
			problems = append(problems, fmt.Errorf("node %s: available %s + reserved %s != baseline %s", node.ID, node.Available, reserved, c.baseline[node.ID]))
		}
		for _, gpu := range node.GPUs {
			held := c.gpuReserved[node.ID][gpu.Index]
			if held > resources.AmountScale {
				problems = append(problems, fmt.Errorf("node %s: GPU %d double-booked: bundles hold %s of it", node.ID, gpu.Index, held))
			}
			if baseline := c.gpuBaseline[node.ID][gpu.Index]; gpu.Available+held != baseline {
				problems = append(problems, fmt.Errorf("node %s: GPU %d available %s + reserved %s != baseline %s", node.ID, gpu.Index, gpu.Available, held, baseline))
			}
		}
	}
	for _, id := range c.order {
		group := c.groups[id]
		problems = append(problems, c.checkGroup(group, nodes, clusterHasTopology)...)
	}
	return errors.Join(problems...)
}

func (c *Cluster) checkGroup(group *Group, nodes map[placement.NodeID]placement.Node, clusterHasTopology bool) []error {
	var problems []error
	request := group.Request
	distinct := make(map[placement.NodeID]int)
	islands := make(map[string]bool) // of the group's whole GPUs
	wholeGPUs := false
	for _, index := range sortedIndices(group.NodeOf) {
		nodeID := group.NodeOf[index]
		node, ok := nodes[nodeID]
		if !ok || !node.Alive {
			problems = append(problems, fmt.Errorf("group %d: bundle %d on dead or unknown node %s", group.ID, index, nodeID))
			continue
		}
		if selectors := request.BundleLabelSelectors; len(selectors) > 0 && !selectors[index].Matches(node.Labels) {
			problems = append(problems, fmt.Errorf("group %d: bundle %d on node %s violates selector %s", group.ID, index, nodeID, selectors[index]))
		}
		if other, shared := distinct[nodeID]; shared && request.Strategy == placement.StrategyStrictSpread {
			problems = append(problems, fmt.Errorf("group %d: STRICT_SPREAD bundles %d and %d share node %s", group.ID, other, index, nodeID))
		}
		distinct[nodeID] = index
		amount, gpuIndices := request.Bundles[index]["GPU"], group.GPUsOf[index]
		want := 0
		switch {
		case len(node.GPUs) == 0 || amount == 0:
		case amount < resources.AmountScale:
			want = 1
		default:
			want = int(amount / resources.AmountScale)
			wholeGPUs = true
		}
		if len(gpuIndices) != want || hasDuplicate(gpuIndices) {
			problems = append(problems, fmt.Errorf("group %d: bundle %d asks %s GPU on node %s (%d GPUs listed) and holds GPUs %v",
				group.ID, index, amount, nodeID, len(node.GPUs), gpuIndices))
		}
		if amount >= resources.AmountScale {
			for _, gpuIndex := range gpuIndices {
				islands[islandKey(node, gpuIndex)] = true
			}
		}
	}
	if request.Strategy != placement.StrategyStrictPack {
		return problems
	}
	islandsMode := request.Topology != placement.TopologyNode && clusterHasTopology && groupHasWholeGPUs(request)
	domains := make(map[string]bool)
	for nodeID := range distinct {
		domains[nodes[nodeID].NVLinkDomain] = true
	}
	switch {
	case len(distinct) > 1 && !(islandsMode && len(domains) == 1 && !domains[""]):
		problems = append(problems, fmt.Errorf("group %d: STRICT_PACK bundles on %d nodes outside one NVLink domain", group.ID, len(distinct)))
	case islandsMode && wholeGPUs && len(islands) > 1:
		problems = append(problems, fmt.Errorf("group %d: STRICT_PACK whole GPUs in %d NVLink islands: %v", group.ID, len(islands), islands))
	}
	return problems
}

// islandKey names the NVLink island of a GPU: the node's domain, or the node-local
// island, or the GPU alone when it has no NVLink peer.
func islandKey(node placement.Node, gpuIndex int) string {
	for _, gpu := range node.GPUs {
		if gpu.Index != gpuIndex {
			continue
		}
		switch {
		case gpu.NVLinkIsland < 0:
			return fmt.Sprintf("%s/gpu-%d", node.ID, gpu.Index)
		case node.NVLinkDomain != "":
			return "domain/" + node.NVLinkDomain
		default:
			return fmt.Sprintf("%s/island-%d", node.ID, gpu.NVLinkIsland)
		}
	}
	return fmt.Sprintf("%s/unknown-gpu-%d", node.ID, gpuIndex)
}

func groupHasWholeGPUs(request placement.Request) bool {
	for _, bundle := range request.Bundles {
		if bundle["GPU"] >= resources.AmountScale {
			return true
		}
	}
	return false
}

func hasDuplicate(values []int) bool {
	for i, value := range values {
		for _, earlier := range values[:i] {
			if earlier == value {
				return true
			}
		}
	}
	return false
}

// CheckNoLeaks checks that every alive node, and each of its GPUs, is back to its
// baseline: call it after removing every group.
func (c *Cluster) CheckNoLeaks() error {
	var problems []error
	for _, node := range c.snapshot.Nodes() {
		if !node.Alive {
			continue
		}
		if !node.Available.Equal(c.baseline[node.ID]) {
			problems = append(problems, fmt.Errorf("node %s: leak: available %s, baseline %s", node.ID, node.Available, c.baseline[node.ID]))
		}
		for _, gpu := range node.GPUs {
			if baseline := c.gpuBaseline[node.ID][gpu.Index]; gpu.Available != baseline {
				problems = append(problems, fmt.Errorf("node %s: leak: GPU %d available %s, baseline %s", node.ID, gpu.Index, gpu.Available, baseline))
			}
		}
	}
	return errors.Join(problems...)
}

func sortedIndices(nodeOf map[int]placement.NodeID) []int {
	indices := make([]int, 0, len(nodeOf))
	for index := range nodeOf {
		indices = append(indices, index)
	}
	sort.Ints(indices)
	return indices
}
