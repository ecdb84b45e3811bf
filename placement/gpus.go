package placement

import (
	"math/bits"

	"github.com/raygo-dev/raygo/internal/resources"
)

// GPU assignment. On a node that lists its GPUs (Node.GPUs), every bundle with a GPU
// amount gets concrete GPUs (BundlePlacement.GPUIndices):
//
//   - whole GPUs ({GPU: n}, n >= 1 and whole): n GPUs that are wholly free, held by the
//     bundle alone;
//   - a fraction ({GPU: f}, f < 1): one GPU with at least f free, shared with other
//     fractional bundles (of any group) while their amounts add up to at most 1. Each
//     GPU's free share is tracked in resources.Amount units, so sharing is exact.
//
// Amounts above 1 that are not whole are refused by validation (resources.ErrFractionalGPUs).
// Which GPUs, in order of preference (the first that decides wins):
//
//  1. rails, for SPREAD and STRICT_SPREAD: the GPUs on the group's target rails for this
//     round (spread.go), so every node uses the same rails and cross-node traffic stays
//     on one rail; on a node that already holds some of the group's bundles, rails the
//     group does not use there yet.
//  2. NVLink islands: a whole-GPU bundle inside one island when one has room, the island
//     with the fewest free GPUs that does (best fit, so the largest free islands stay
//     whole); when none has room, across the fewest islands, largest first. STRICT_PACK
//     confines whole GPUs to the group's island (gpuPreference.island).
//  3. fractions: the partly used GPU with the least left that still fits; else a wholly
//     free GPU in the island with the fewest free GPUs, so whole GPUs and large islands
//     stay whole for whole-GPU bundles.
//  4. the lower NVML index.
//
// A node is small (8 GPUs; NewSnapshot allows MaxGPUsPerNode), so the picker scans it;
// it works on a scratch copy of the node's free shares, so a decision can try a node
// without changing anything. The loops over every node use bitmasks of the wholly free
// GPUs instead (attempt.wholeFree, at the end of this file).

// gpuRequest is a bundle's GPU demand: whole GPUs, or a fraction of one, or none.
type gpuRequest struct {
	whole    int              // >= 1 for whole-GPU bundles
	fraction resources.Amount // 0 < fraction < resources.AmountScale for fractional bundles
}

// gpuRequestOf reads a validated GPU amount.
func gpuRequestOf(amount resources.Amount) gpuRequest {
	switch {
	case amount <= 0:
		return gpuRequest{}
	case amount < resources.AmountScale:
		return gpuRequest{fraction: amount}
	default:
		return gpuRequest{whole: int(amount / resources.AmountScale)}
	}
}

func (g gpuRequest) any() bool { return g.whole > 0 || g.fraction > 0 }

// share is what the request takes of each GPU it gets.
func (g gpuRequest) share() resources.Amount {
	if g.whole > 0 {
		return resources.AmountScale
	}
	return g.fraction
}

// gpuPreference steers a pick on one node.
type gpuPreference struct {
	// island >= 0 confines whole GPUs to that island (STRICT_PACK); -1: any.
	island int32
	// rails are the target rails: one per whole GPU, or one for a fraction. nil: none.
	rails []int32
	// groupTaken is the group's share of each of the node's GPUs: GPUs on rails the group
	// already uses on the node come last. nil: no such preference.
	groupTaken []resources.Amount
}

// gpuPicker chooses GPUs on one node at a time; it holds scratch space so picks do not
// allocate. Not safe for concurrent use: each decision has its own.
type gpuPicker struct {
	snapshot   *Snapshot
	islandIDs  []int32 // the islands of the node being scanned (the snapshot's: read only)
	islandFree []int   // wholly free GPUs (that the pick may use) per entry of islandIDs
	islandSize []int   // the node's GPUs per entry of islandIDs (the snapshot's: read only)
}

// pick chooses GPUs on node for request and appends their positions on the node
// (0-based, in snapshot order) to out. free is the node's per-GPU free share; the pick
// subtracts what it takes. It returns false, with free unchanged, when the node cannot
// give the request its GPUs.
func (p *gpuPicker) pick(node int, free []resources.Amount, request gpuRequest, pref *gpuPreference, out []int) ([]int, bool) {
	gpus, _ := p.snapshot.nodeGPUs(node)
	if request.whole > 0 {
		return p.pickWhole(node, gpus, free, request.whole, pref, out)
	}
	return p.pickFraction(node, gpus, free, request.fraction, pref, out)
}

func (p *gpuPicker) pickWhole(node int, gpus []snapshotGPU, free []resources.Amount, count int, pref *gpuPreference, out []int) ([]int, bool) {
	if countWhollyFree(gpus, free, pref.island) < count {
		return out, false
	}
	start := len(out)
	if len(pref.rails) >= count {
		for _, rail := range pref.rails[:count] {
			found := -1
			for g := range gpus {
				if usableWhole(gpus, free, g, pref.island) && gpus[g].rail == rail {
					found = g
					break
				}
			}
			if found < 0 {
				break
			}
			free[found] = 0
			out = append(out, found)
		}
		if len(out)-start == count {
			return out, true
		}
		for _, g := range out[start:] {
			free[g] = resources.AmountScale
		}
		out = out[:start]
	}
	p.countIslands(node, gpus, free, pref.island)
	best := -1
	for i, islandFree := range p.islandFree {
		if islandFree >= count && (best < 0 || islandFree < p.islandFree[best]) {
			best = i
		}
	}
	if best >= 0 {
		return p.takeFromIsland(gpus, free, p.islandIDs[best], count, pref, out), true
	}
	for need := count; need > 0; {
		largest := 0
		for i, islandFree := range p.islandFree {
			if islandFree > p.islandFree[largest] {
				largest = i
			}
		}
		take := min(need, p.islandFree[largest])
		out = p.takeFromIsland(gpus, free, p.islandIDs[largest], take, pref, out)
		p.islandFree[largest] = 0
		need -= take
	}
	return out, true
}

// takeFromIsland takes count wholly free GPUs of island: on target rails first, then on
// rails the group does not use on the node, then the lowest positions.
func (p *gpuPicker) takeFromIsland(gpus []snapshotGPU, free []resources.Amount, island int32, count int, pref *gpuPreference, out []int) []int {
	for range count {
		best, bestKey := -1, 0
		for g := range gpus {
			if free[g] != resources.AmountScale || gpus[g].island != island {
				continue
			}
			key := 2*railMismatch(gpus, g, pref) + groupUsesRail(gpus, g, pref)
			if best < 0 || key < bestKey {
				best, bestKey = g, key
			}
		}
		free[best] = 0
		out = append(out, best)
	}
	return out
}

func (p *gpuPicker) pickFraction(node int, gpus []snapshotGPU, free []resources.Amount, fraction resources.Amount, pref *gpuPreference, out []int) ([]int, bool) {
	p.countIslands(node, gpus, free, -1)
	best := -1
	var bestKey [4]int64
	for g := range gpus {
		if free[g] < fraction {
			continue
		}
		// A partly used GPU (wholly = 0) before a wholly free one; among partly used ones
		// the least left after; among wholly free ones the least free island.
		wholly, fit := int64(0), int64(free[g]-fraction)
		if free[g] == resources.AmountScale {
			wholly, fit = 1, int64(p.islandFree[gpus[g].islandSlot])
		}
		key := [4]int64{int64(railMismatch(gpus, g, pref)), int64(groupUsesRail(gpus, g, pref)), wholly, fit}
		if best < 0 || key[0] < bestKey[0] || key[0] == bestKey[0] && (key[1] < bestKey[1] ||
			key[1] == bestKey[1] && (key[2] < bestKey[2] || key[2] == bestKey[2] && key[3] < bestKey[3])) {
			best, bestKey = g, key
		}
	}
	if best < 0 {
		return out, false
	}
	free[best] -= fraction
	return append(out, best), true
}

// countIslands sets islandIDs to the node's islands and islandFree to how many wholly
// free GPUs each has (counting only island's when it is >= 0).
func (p *gpuPicker) countIslands(node int, gpus []snapshotGPU, free []resources.Amount, island int32) {
	record := &p.snapshot.nodes[node]
	p.islandIDs, p.islandSize = record.islands, record.islandSizes
	if cap(p.islandFree) < len(p.islandIDs) {
		p.islandFree = make([]int, len(p.islandIDs))
	}
	p.islandFree = p.islandFree[:len(p.islandIDs)]
	clear(p.islandFree)
	for g := range gpus {
		if free[g] == resources.AmountScale && (island < 0 || gpus[g].island == island) {
			p.islandFree[gpus[g].islandSlot]++
		}
	}
}

// islandTaken is how many wholly free GPUs the island has that the picker, choosing by
// islands, would take request's GPUs from: the smaller, the larger the free islands it
// leaves intact. 0 when a partly used GPU takes a fraction; when no island has room
// for all of request, the most free of the node's islands (it would take them all).
func (p *gpuPicker) islandTaken(node int, free []resources.Amount, request gpuRequest) int {
	gpus, _ := p.snapshot.nodeGPUs(node)
	need := request.whole
	if need == 0 {
		for _, share := range free {
			if share < resources.AmountScale && share >= request.fraction {
				return 0
			}
		}
		need = 1
	}
	p.countIslands(node, gpus, free, -1)
	best, largest := -1, 0
	for i, islandFree := range p.islandFree {
		if islandFree >= need && (best < 0 || islandFree < p.islandFree[best]) {
			best = i
		}
		largest = max(largest, islandFree)
	}
	if best < 0 {
		return largest
	}
	return p.islandFree[best]
}

// largestFreeIsland is the most wholly free GPUs in one island of the node (only
// island when it is >= 0).
func (p *gpuPicker) largestFreeIsland(node int, free []resources.Amount, island int32) int {
	gpus, _ := p.snapshot.nodeGPUs(node)
	p.countIslands(node, gpus, free, island)
	largest := 0
	for _, islandFree := range p.islandFree {
		largest = max(largest, islandFree)
	}
	return largest
}

func usableWhole(gpus []snapshotGPU, free []resources.Amount, g int, island int32) bool {
	return free[g] == resources.AmountScale && (island < 0 || gpus[g].island == island)
}

func countWhollyFree(gpus []snapshotGPU, free []resources.Amount, island int32) int {
	count := 0
	for g := range gpus {
		if usableWhole(gpus, free, g, island) {
			count++
		}
	}
	return count
}

// gpusFitIn reports whether free (a node's per-GPU free shares) can take request:
// enough wholly free GPUs (in island when it is >= 0), or one GPU with the fraction.
func gpusFitIn(gpus []snapshotGPU, free []resources.Amount, request gpuRequest, island int32) bool {
	if request.whole > 0 {
		return countWhollyFree(gpus, free, island) >= request.whole
	}
	return mostFreeOnOneGPU(free) >= request.fraction
}

// mostFreeOnOneGPU is the largest free share of one GPU.
func mostFreeOnOneGPU(free []resources.Amount) resources.Amount {
	most := resources.Amount(0)
	for _, share := range free {
		most = max(most, share)
	}
	return most
}

// railMismatch is 1 when pref has target rails and GPU g is on none of them.
func railMismatch(gpus []snapshotGPU, g int, pref *gpuPreference) int {
	if len(pref.rails) == 0 {
		return 0
	}
	for _, rail := range pref.rails {
		if gpus[g].rail == rail {
			return 0
		}
	}
	return 1
}

// groupUsesRail is 1 when the group already holds a GPU of the node on GPU g's rail.
func groupUsesRail(gpus []snapshotGPU, g int, pref *gpuPreference) int {
	if pref.groupTaken == nil || gpus[g].rail < 0 {
		return 0
	}
	for other, taken := range pref.groupTaken {
		if taken > 0 && gpus[other].rail == gpus[g].rail {
			return 1
		}
	}
	return 0
}

// railsFree reports whether node has, for each target rail, its own GPU on that rail
// that could take request (wholly free for whole GPUs, the fraction free otherwise).
func railsFree(gpus []snapshotGPU, free []resources.Amount, rails []int32, request gpuRequest) bool {
	need := request.share()
	var used uint64 // positions already matched
	for _, rail := range rails {
		found := false
		for g := range gpus {
			if used&(1<<g) == 0 && gpus[g].rail == rail && free[g] >= need {
				used |= 1 << g
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Bitmask forms of the node-level checks, for the loops over every node: bit g is the
// node's GPU at position g (NewSnapshot caps nodes at MaxGPUsPerNode = 64 GPUs).

// wholeFreeMask is the mask of the wholly free GPUs among free.
func wholeFreeMask(free []resources.Amount) uint64 {
	var mask uint64
	for g, share := range free {
		if share == resources.AmountScale {
			mask |= 1 << g
		}
	}
	return mask
}

// wholeFree is the mask of node's wholly free GPUs in the attempt's view: the snapshot's
// (all of them in the capacity view) for a node without the group's bundles, else
// computed from what the group took.
func (a *attempt) wholeFree(node int) uint64 {
	if held := a.groupNode(node); held != nil && held.gpuTaken != nil {
		var mask uint64
		_, base := a.snapshot.nodeGPUs(node)
		for g, taken := range held.gpuTaken {
			share := resources.Amount(resources.AmountScale)
			if a.view == viewAvailable {
				share = base[g]
			}
			if share-taken == resources.AmountScale {
				mask |= 1 << g
			}
		}
		return mask
	}
	if a.view == viewCapacity {
		return a.snapshot.nodes[node].allGPUs
	}
	return a.snapshot.wholeFree[node]
}

// islandMask is the mask of node's GPUs in island, or all of them when island < 0.
func (s *Snapshot) islandMask(node int, island int32) uint64 {
	record := &s.nodes[node]
	if island < 0 {
		return record.allGPUs
	}
	for slot, id := range record.islands {
		if id == island {
			return record.islandMasks[slot]
		}
	}
	return 0
}

// islandTakenMask is islandTaken for whole GPUs, from the mask of wholly free GPUs.
func (s *Snapshot) islandTakenMask(node int, wholeFree uint64, need int) int {
	best, largest := -1, 0
	for _, islandMask := range s.nodes[node].islandMasks {
		free := bits.OnesCount64(wholeFree & islandMask)
		if free >= need && (best < 0 || free < best) {
			best = free
		}
		largest = max(largest, free)
	}
	if best < 0 {
		return largest
	}
	return best
}

// breaksIslandMask reports whether need whole GPUs would come from one of node's
// islands that is wholly free and larger than need (see islandTaken).
func (s *Snapshot) breaksIslandMask(node int, wholeFree uint64, need int) bool {
	taken := s.islandTakenMask(node, wholeFree, need)
	record := &s.nodes[node]
	for slot, islandMask := range record.islandMasks {
		if free := bits.OnesCount64(wholeFree & islandMask); free == taken && free == record.islandSizes[slot] && free > need {
			return true
		}
	}
	return false
}

// largestFreeIslandMask is the most wholly free GPUs in one of node's islands.
func (s *Snapshot) largestFreeIslandMask(node int, wholeFree uint64) int {
	largest := 0
	for _, islandMask := range s.nodes[node].islandMasks {
		largest = max(largest, bits.OnesCount64(wholeFree&islandMask))
	}
	return largest
}

// railsFreeMask is railsFree for whole GPUs: each target rail has its own wholly free
// GPU.
func railsFreeMask(gpus []snapshotGPU, wholeFree uint64, rails []int32) bool {
	for _, rail := range rails {
		found := false
		for rest := wholeFree; rest != 0; rest &= rest - 1 {
			g := bits.TrailingZeros64(rest)
			if gpus[g].rail == rail {
				wholeFree &^= 1 << g
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// countFreeRailsMask is countFreeRails for whole GPUs.
func countFreeRailsMask(gpus []snapshotGPU, wholeFree uint64, counts []int) {
	for rest := wholeFree; rest != 0; rest &= rest - 1 {
		if slot := gpus[bits.TrailingZeros64(rest)].railSlot; slot >= 0 {
			counts[slot]++
		}
	}
}
