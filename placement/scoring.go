package placement

import (
	"sort"

	"github.com/raygo-dev/raygo/internal/resources"
)

// Scoring. Among the nodes that pass every feasibility stage, a strategy ranks the
// candidates by a key compared lexicographically, lower first. Nodes are visited in id
// order and only a strictly better key replaces the best, so ties go to the lower node
// id and a decision can be replayed.
//
//	key[0]    the fragmentation growth, for groups that do not ask for GPU topology
//	          (fragmentation_score.go; 0 without Request.Workload).
//	key[1:5]  the strategy's preferences: SPREAD prefers the node with the fewest of
//	          the group's bundles, then one in the scalable units chosen for the
//	          group, then one where the bundle's GPUs sit on the target rails inside one
//	          NVLink island, then one where they do not break into a wholly free island
//	          (spread.go); PACK prefers a node the group already uses, then the node
//	          that takes the most bundles, then the fewest NVLink islands for them; the
//	          island search (islands.go) prefers the least free GPUs left in the island,
//	          then the fewest nodes, then a node-local island.
//	key[5]    the fragmentation growth, for groups that ask for GPU topology.
//	key[6:]   best fit: for each decision resource in priority order (GPU first), the
//	          fraction of the node's total that would stay free after the placement.
//	          The least leftover wins.
//
// Best fit is a deliberate departure from Ray, whose LeastResourceScorer picks the node
// with the most left: that scatters small groups over every node until no node is whole,
// and a later STRICT_PACK of a whole node waits forever (ray-project/ray#35409). With
// best fit small groups fill partly used nodes first and empty nodes stay empty. A
// bundle without GPUs still sees the GPU column: the fraction that stays free is the
// node's idle GPUs, so CPU-only work goes first to nodes without idle GPUs and does not
// strand them.

// preferenceSlots is the number of key entries before the best-fit fractions: the
// strategy's four and the fragmentation stage's two (fragmentationFirst, fragmentationAfter).
const preferenceSlots = 6

// ranking keeps the best candidate seen so far. Fill candidateKey, then call offer.
type ranking struct {
	best         int
	bestKey      []float64
	candidateKey []float64
}

func (d *decision) newRanking() *ranking {
	size := preferenceSlots + len(d.resources)
	return &ranking{best: -1, bestKey: make([]float64, size), candidateKey: make([]float64, size)}
}

func (r *ranking) reset() { r.best = -1 }

// bar is the key a candidate must beat, or nil while there is no best.
func (r *ranking) bar() []float64 {
	if r.best < 0 {
		return nil
	}
	return r.bestKey
}

// offer makes node the best if its key is strictly better, and reports whether it did.
func (r *ranking) offer(node int) bool {
	if r.best >= 0 && !keyLess(r.candidateKey, r.bestKey) {
		return false
	}
	r.best = node
	r.bestKey, r.candidateKey = r.candidateKey, r.bestKey
	return true
}

func keyLess(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// setPreferences fills the strategy slots of the candidate key (unused ones are 0) and
// zeroes the fragmentation slots (setFragmentation fills one).
func (r *ranking) setPreferences(preferences ...float64) {
	setPreferenceKey(r.candidateKey, preferences...)
}

// setPreferenceKey fills the strategy slots of key and zeroes the fragmentation slots.
func setPreferenceKey(key []float64, preferences ...float64) {
	clear(key[:preferenceSlots])
	copy(key[fragmentationFirst+1:fragmentationAfter], preferences)
}

// setBestFit fills the best-fit slots of the ranking's candidate key.
func (d *decision) setBestFit(r *ranking, node int, freeAfter []resources.Amount) {
	d.setBestFitKey(r.candidateKey, node, freeAfter)
}

// setBestFitKey fills the best-fit slots of key from what node would have free after
// the placement, per decision resource.
func (d *decision) setBestFitKey(key []float64, node int, freeAfter []resources.Amount) {
	key = key[preferenceSlots:]
	if d.fragmentationReplacesBestFit() {
		clear(key)
		return
	}
	for resource := range d.resources {
		total := d.totalAt(node, resource)
		if total <= 0 {
			key[resource] = 0
			continue
		}
		key[resource] = float64(freeAfter[resource]) / float64(total)
	}
}

// topNodes keeps the best limit candidates, best first. Fill candidateKey, then call
// offer; like ranking, an equal key does not displace a node visited earlier.
type topNodes struct {
	limit        int
	width        int
	nodes        []int
	keys         []float64 // len(nodes) keys of width entries, in nodes' order
	candidateKey []float64
}

func (d *decision) newTopNodes(limit int) *topNodes {
	width := preferenceSlots + len(d.resources)
	return &topNodes{limit: limit, width: width, candidateKey: make([]float64, width)}
}

// bar is the key a candidate must beat to be kept, or nil while fewer than limit are.
func (t *topNodes) bar() []float64 {
	if count := len(t.nodes); count == t.limit && count > 0 {
		return t.keys[(count-1)*t.width : count*t.width]
	}
	return nil
}

func (t *topNodes) offer(node int) {
	count, width := len(t.nodes), t.width
	if count == t.limit && !keyLess(t.candidateKey, t.keys[(count-1)*width:]) {
		return
	}
	// The first kept node whose key is worse than the candidate's.
	at := sort.Search(count, func(i int) bool { return keyLess(t.candidateKey, t.keys[i*width:(i+1)*width]) })
	if count < t.limit {
		t.nodes = append(t.nodes, 0)
		t.keys = append(t.keys, t.candidateKey...)
	}
	copy(t.nodes[at+1:], t.nodes[at:])
	copy(t.keys[(at+1)*width:], t.keys[at*width:])
	t.nodes[at] = node
	copy(t.keys[at*width:(at+1)*width], t.candidateKey)
}

// boolKey maps a preference to a key entry: false sorts first.
func boolKey(worse bool) float64 {
	if worse {
		return 1
	}
	return 0
}
