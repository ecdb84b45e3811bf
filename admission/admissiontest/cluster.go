// Package admissiontest ships an in-memory admission.Capacity for tests, simulations
// and benchmarks: nodes with whole GPUs, bundles placed first-fit, running work ending
// at its declared end. It models GPUs only (other resources always fit), which is what
// quota-and-gang scenarios need; the GCS answers with the real placement code.
package admissiontest

import (
	"slices"

	"github.com/raygo-dev/raygo/admission"
	"github.com/raygo-dev/raygo/internal/pending"
	"github.com/raygo-dev/raygo/internal/resources"
)

// NoEnd is the end of work that declared no maximum runtime.
const NoEnd = -1

// Cluster is a simulated GPU cluster. Now is the simulated time; the caller moves it.
type Cluster struct {
	Now     int64
	total   []resources.Amount
	free    []resources.Amount
	maxNode resources.Amount
	running map[string]run
	// freeAt caches the free GPUs per node at a time (FitsAt), kept in step by
	// Take/Release/Finish.
	freeAt map[int64][]resources.Amount
}

type run struct {
	nodes []int
	gpus  []resources.Amount
	end   int64
}

var _ admission.Capacity = (*Cluster)(nil)

// NewCluster returns nodes idle nodes of gpusPerNode GPUs each.
func NewCluster(nodes, gpusPerNode int) *Cluster {
	c := &Cluster{running: map[string]run{}, freeAt: map[int64][]resources.Amount{}}
	for range nodes {
		g := resources.Amount(gpusPerNode) * resources.AmountScale
		c.total = append(c.total, g)
		c.free = append(c.free, g)
		c.maxNode = max(c.maxNode, g)
	}
	return c
}

func gpus(bundle resources.Set) resources.Amount { return bundle[resources.GPU] }

// place puts every bundle first-fit on free; false (free partly used) if one does not fit.
func place(free []resources.Amount, gang []resources.Set, nodes []int) ([]int, bool) {
	for _, bundle := range gang {
		need := gpus(bundle)
		i := 0
		if need > 0 {
			for i < len(free) && free[i] < need {
				i++
			}
			if i == len(free) {
				return nodes, false
			}
		}
		free[i] -= need
		nodes = append(nodes, i)
	}
	return nodes, true
}

// Fit implements admission.Capacity.
func (c *Cluster) Fit(gang []resources.Set) pending.Reason {
	var sum, capacity, freeSum resources.Amount
	for _, b := range gang {
		if gpus(b) > c.maxNode {
			return pending.Infeasible
		}
		sum += gpus(b)
	}
	for i := range c.total {
		capacity += c.total[i]
		freeSum += c.free[i]
	}
	switch {
	case sum > capacity:
		return pending.Infeasible
	case sum > freeSum:
		return pending.NoResources
	}
	if _, ok := place(slices.Clone(c.free), gang, nil); !ok {
		return pending.Fragmented
	}
	return ""
}

// ends returns the distinct declared end times of running work, ascending.
func (c *Cluster) ends() []int64 {
	var ends []int64
	for _, r := range c.running {
		if r.end != NoEnd {
			ends = append(ends, max(r.end, c.Now))
		}
	}
	slices.Sort(ends)
	return slices.Compact(ends)
}

// EarliestFit implements admission.Capacity: a binary search over the declared ends
// (more work ended never makes first-fit of whole-GPU bundles on more free GPUs fail
// here, as each node only gains).
func (c *Cluster) EarliestFit(gang []resources.Set) (int64, bool) {
	if c.Fit(gang) == "" {
		return c.Now, true
	}
	ends := c.ends()
	i, _ := slices.BinarySearchFunc(ends, true, func(at int64, _ bool) int {
		if c.FitsAt(gang, at) {
			return 0
		}
		return -1
	})
	if i == len(ends) {
		return 0, false
	}
	for i > 0 && c.FitsAt(gang, ends[i-1]) { // the search stops on any fitting end
		i--
	}
	return ends[i], true
}

// FitsAt implements admission.Capacity.
func (c *Cluster) FitsAt(gang []resources.Set, at int64) bool {
	free, ok := c.freeAt[at]
	if !ok {
		free = slices.Clone(c.free)
		for _, r := range c.running {
			if r.end != NoEnd && r.end <= at {
				for k, node := range r.nodes {
					free[node] += r.gpus[k]
				}
			}
		}
		c.freeAt[at] = free
	}
	_, fits := place(slices.Clone(free), gang, nil)
	return fits
}

// Take implements admission.Capacity: w runs from Now until Now + w.MaxRuntime.
func (c *Cluster) Take(w admission.Workload) {
	nodes, ok := place(c.free, w.Bundles, nil)
	if !ok {
		panic("admissiontest: Take of a gang that does not fit (Decide must ask Fit first)")
	}
	end := int64(NoEnd)
	if w.MaxRuntime > 0 {
		end = c.Now + w.MaxRuntime
	}
	r := run{nodes: nodes, end: end}
	for _, b := range w.Bundles {
		r.gpus = append(r.gpus, gpus(b))
	}
	c.running[w.ID] = r
	c.adjustCache(r, -1)
}

// Release implements admission.Capacity.
func (c *Cluster) Release(w admission.Workload) { c.Finish(w.ID) }

// Finish ends running work (its end came, or it was removed); false if not running.
func (c *Cluster) Finish(id string) bool {
	r, ok := c.running[id]
	if !ok {
		return false
	}
	delete(c.running, id)
	for k, node := range r.nodes {
		c.free[node] += r.gpus[k]
	}
	c.adjustCache(r, +1)
	return true
}

// adjustCache moves r's GPUs in every cached future in which r is still running.
func (c *Cluster) adjustCache(r run, sign resources.Amount) {
	for at, free := range c.freeAt {
		if r.end == NoEnd || r.end > at {
			for k, node := range r.nodes {
				free[node] += sign * r.gpus[k]
			}
		}
	}
}

// Advance moves the clock to now and drops cached futures that are past.
func (c *Cluster) Advance(now int64) {
	c.Now = now
	for at := range c.freeAt {
		if at < now {
			delete(c.freeAt, at)
		}
	}
}

// Due returns the ids of running work whose declared end is at or before Now, sorted.
func (c *Cluster) Due() []string {
	var due []string
	for id, r := range c.running {
		if r.end != NoEnd && r.end <= c.Now {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	return due
}

// UsedGPUs returns the GPUs held by running work.
func (c *Cluster) UsedGPUs() resources.Amount {
	var used resources.Amount
	for i := range c.total {
		used += c.total[i] - c.free[i]
	}
	return used
}

// LatestEnd returns the latest declared end of running work; false if some running work
// declared none (or nothing runs).
func (c *Cluster) LatestEnd() (int64, bool) {
	latest, ok := int64(0), len(c.running) > 0
	for _, r := range c.running {
		if r.end == NoEnd {
			return 0, false
		}
		latest = max(latest, r.end)
	}
	return latest, ok
}
