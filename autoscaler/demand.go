package autoscaler

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
)

// Names of demand that is not a placement group, as Launch.For and Infeasible.For spell
// them.
const (
	ForRequestResources = "request_resources"
	ForMinWorkers       = "min_workers"
	shapePrefix         = "shape:"
)

// ShapeName is how a plan names tasks and actors of one shape (Launch.For,
// Infeasible.For): "shape:" and the resources as resources.Set prints them
// ("shape:{CPU: 1, GPU: 1}"), then the label selector when there is one
// ("shape:{CPU: 1} {zone: a}").
func ShapeName(shape resources.Set, selector nodelabel.Selector) string {
	name := shapePrefix + shape.String()
	if len(selector) > 0 {
		name += " " + selector.String()
	}
	return name
}

// demand is one unit of pending work the planner tries to hold: a placement group
// (count 1, all or nothing) or the tasks and actors of one shape (count instances, each
// placed on its own).
type demand struct {
	// name is Launch.For / Infeasible.For.
	name string
	// request is what placement schedules: the group, or one instance of the shape as a
	// one-bundle group. MIG profiles are renamed to counted resources (countedMIG).
	request placement.Request
	// original is the request as the user gave it, for reasons.
	original placement.Request
	count    int
	shape    bool
	// gpus and cpus are the whole request's asks, for ordering.
	gpus, cpus resources.Amount
	// key identifies the request for the planner's caches: two demands with the same
	// key place the same way on the same nodes.
	key string
	// runs are the request's runs of equal bundles (with equal selectors), in order; a
	// run's text is the bundle's text in key.
	runs []bundleRun
	// keyID numbers key in a class plan (classPool.keyID), packID a STRICT_PACK's
	// bundle and topology (classPool.packMost); 0 until then.
	keyID, packID int
	// distinct are the request's distinct bundles, for the open-node filter.
	distinct []resources.Set
	// classes are the pool's fit classes of distinct, set on first use (pool.classesOf).
	classes []int
	// sum is the bundles summed over the pool's columns, set on first use (pool.sumOf).
	sum []columnAmount
	// anyGPU: some bundle asks for GPUs or a MIG profile.
	anyGPU bool
	// bundle is a gang of equal bundles' bundle as a demand of its own, set on first use
	// (bundleDemand).
	bundle *demand
	// sumSet is the bundles summed, set on first use (total).
	sumSet resources.Set
}

// total is the request's bundles summed.
func (d *demand) total() resources.Set {
	if d.sumSet == nil {
		if len(d.request.Bundles) == 1 {
			d.sumSet = d.request.Bundles[0]
		} else {
			d.sumSet = make(resources.Set)
			for _, bundle := range d.request.Bundles {
				for name, amount := range bundle {
					d.sumSet[name] += amount
				}
			}
		}
	}
	return d.sumSet
}

// countedMIG renames MIG profile resources ("nvidia.com/mig-1g.10gb") to plain counted
// resources ("mig-slot/1g.10gb") in a set. The planner does not model MIG geometry on
// nodes that do not exist yet: a node type holds a profile when its Resources list it,
// as many bundles as the amount says (see doc.go). The placement core places a MIG
// profile only through a node's MIG slot maps, so the planner hands it the renamed,
// counted resource instead. Sets without MIG names are returned as they are.
func countedMIG(set resources.Set) resources.Set {
	renamed := false
	for name := range set {
		if mig.IsResource(name) {
			renamed = true
			break
		}
	}
	if !renamed {
		return set
	}
	out := make(resources.Set, len(set))
	for name, amount := range set {
		if profile, ok := strings.CutPrefix(name, mig.ResourcePrefix); ok {
			name = countedMIGPrefix + profile
		}
		out[name] += amount
	}
	return out
}

const countedMIGPrefix = "mig-slot/"

// isGPUResource: the resource is GPUs, or slots of a MIG profile (countedMIG's names).
func isGPUResource(name string) bool {
	return name == resources.GPU || strings.HasPrefix(name, countedMIGPrefix)
}

// collectDemand turns the input's pending work into demand, in the order the planner
// serves it: placement groups first (gangs are hardest to fit: largest GPU ask first,
// then most bundles, then id), then shapes (largest GPU ask per instance first, then
// CPU, then name). Work held by admission is not demand. Identical shapes (same
// resources and selector) are merged. Shapes whose selector does not parse are
// returned as infeasible.
func collectDemand(in Input) (groups, shapes []*demand, bad []Infeasible) {
	// Gangs of one bundle repeated, alike in strategy, topology and size and without
	// selectors, are the same demand but for their name: the first is worked out, the
	// others copy it (large inputs hold thousands of such gangs).
	alike := make(map[string]*demand) // by alikeKey
	var buffer []byte
	groups = make([]*demand, 0, len(in.Groups))
	copies := make([]demand, 0, len(in.Groups)) // one allocation for the copies
	for _, group := range in.Groups {
		if group.Reason.HeldByAdmission() {
			continue
		}
		request := unplacedPart(group.Request)
		if len(request.Bundles) == 0 {
			continue
		}
		var ok bool
		buffer, ok = alikeKey(buffer[:0], request)
		if first := alike[string(buffer)]; ok && first != nil {
			copies = append(copies, *first)
			d := &copies[len(copies)-1]
			d.name, d.original = group.ID, request
			groups = append(groups, d)
			continue
		}
		d := newDemandRepeated(group.ID, request, 1, false, ok)
		if ok {
			alike[string(buffer)] = d
		}
		groups = append(groups, d)
	}
	merged := make(map[string]*demand)
	var key []byte
	for _, shape := range in.Shapes {
		if shape.Reason.HeldByAdmission() || shape.Count <= 0 {
			continue
		}
		// The shape's map is read once, for both the zero test and the key.
		var buffer [8]setEntry
		entries := entriesOf(buffer[:0], shape.Shape)
		if entries.zero() {
			continue
		}
		selector, err := nodelabel.ParseSelector(shape.LabelSelector)
		if err != nil {
			bad = append(bad, Infeasible{For: shapePrefix + shape.Shape.String(), Reason: "invalid label selector: " + err.Error()})
			continue
		}
		// Shapes are merged by their exact amounts and selector (what their name says),
		// written without allocating: large inputs list thousands.
		key = entries.appendSorted(key[:0])
		if len(selector) > 0 {
			key = append(append(key, '|'), selector.String()...)
		}
		if existing, ok := merged[string(key)]; ok {
			existing.count += shape.Count
			continue
		}
		name := ShapeName(shape.Shape, selector)
		request := placement.Request{Bundles: []resources.Set{shape.Shape}, Strategy: placement.StrategyPack}
		if len(selector) > 0 {
			request.BundleLabelSelectors = []nodelabel.Selector{selector}
		}
		d := newDemand(name, request, shape.Count, true)
		merged[string(key)] = d
		shapes = append(shapes, d)
	}
	sortGroups(groups)
	slices.SortStableFunc(shapes, func(a, b *demand) int {
		return cmp.Or(cmp.Compare(b.gpus, a.gpus), cmp.Compare(b.cpus, a.cpus), strings.Compare(a.name, b.name))
	})
	return groups, shapes, bad
}

// sortGroups orders groups as collectDemand says: the largest GPU ask first, then the
// most bundles, then CPU, then id. Large plans sort thousands: the numeric keys are
// copied into one array of small entries (moved cheaply, read without pointer chasing),
// names are read only on ties, and the input order breaks the last ties, so the unstable
// sort gives the stable order.
func sortGroups(groups []*demand) {
	type entry struct {
		gpus, cpus resources.Amount
		bundles    int32
		index      int32
	}
	entries := make([]entry, len(groups))
	for i, d := range groups {
		entries[i] = entry{d.gpus, d.cpus, int32(len(d.request.Bundles)), int32(i)}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.gpus != b.gpus {
			return cmp.Compare(b.gpus, a.gpus)
		}
		if a.bundles != b.bundles {
			return cmp.Compare(b.bundles, a.bundles)
		}
		if a.cpus != b.cpus {
			return cmp.Compare(b.cpus, a.cpus)
		}
		if c := strings.Compare(groups[a.index].name, groups[b.index].name); c != 0 {
			return c
		}
		return cmp.Compare(a.index, b.index)
	})
	sorted := make([]*demand, len(groups))
	for i, e := range entries {
		sorted[i] = groups[e.index]
	}
	copy(groups, sorted)
}

// alikeKey identifies a gang of one bundle repeated: it appends to key the request's strategy, topology, size and bundle; ok is
// false unless every bundle equals the first and there are no selectors.
func alikeKey(key []byte, request placement.Request) ([]byte, bool) {
	if len(request.BundleLabelSelectors) > 0 {
		return key, false
	}
	var buffer [8]setEntry
	first := entriesOf(buffer[:0], request.Bundles[0])
	for _, bundle := range request.Bundles[1:] {
		if !first.sameAs(bundle) {
			return key, false
		}
	}
	key = append(append(key, request.Strategy...), '|')
	key = append(append(key, request.Topology...), '|')
	key = append(strconv.AppendInt(key, int64(len(request.Bundles)), 10), '|')
	return first.appendSorted(key), true
}

// servingOrder merges the groups and shapes, each in collectDemand's order, into the
// order the planner serves them: the most GPUs first (a group by its whole ask, a shape
// by one instance), then the most CPUs, a group before a shape on a tie. GPU nodes are
// the dearest and are launched for GPU demand; CPU-only work served after it packs onto
// their spare CPUs instead of launching CPU nodes of its own (a CPU-only STRICT_PACK
// served first would get a CPU node, and the GPU task after it a GPU node that could
// have held both). Groups keep their relative order, so a gang still goes before a
// smaller one.
func servingOrder(groups, shapes []*demand) []*demand {
	out := make([]*demand, 0, len(groups)+len(shapes))
	for len(groups) > 0 || len(shapes) > 0 {
		if len(shapes) == 0 || len(groups) > 0 &&
			cmp.Or(cmp.Compare(shapes[0].gpus, groups[0].gpus), cmp.Compare(shapes[0].cpus, groups[0].cpus)) <= 0 {
			out, groups = append(out, groups[0]), groups[1:]
			continue
		}
		out, shapes = append(out, shapes[0]), shapes[1:]
	}
	return out
}

// demandOrder merges the groups and shapes, each in collectDemand's order, into the
// order the planner serves them.
type demandOrder func(groups, shapes []*demand) []*demand

var (
	_ demandOrder = servingOrder
	_ demandOrder = groupsFirst
	_ demandOrder = shapesFirst
	_ demandOrder = cpusFirst
)

// groupsFirst serves every group before any shape.
func groupsFirst(groups, shapes []*demand) []*demand {
	return append(slices.Clip(groups), shapes...)
}

// shapesFirst serves every shape before any group.
func shapesFirst(groups, shapes []*demand) []*demand {
	return append(slices.Clip(shapes), groups...)
}

// cpusFirst serves the demand by the CPUs it asks (a group by its bundles' sum), then
// by GPUs, most first: first fit decreasing by the resource most demand shares, where
// the serving order puts GPU demand first.
func cpusFirst(groups, shapes []*demand) []*demand {
	out := servingOrder(groups, shapes)
	slices.SortStableFunc(out, func(a, b *demand) int {
		return cmp.Or(cmp.Compare(b.cpus, a.cpus), cmp.Compare(b.gpus, a.gpus))
	})
	return out
}

// unplacedPart is the part of a group still to place: a group being rescheduled after a
// node loss already holds some bundles (PlacedBundles), and only the others are demand.
// They are planned as a group of their own, with the group's strategy.
func unplacedPart(request placement.Request) placement.Request {
	if len(request.PlacedBundles) == 0 {
		return request
	}
	out := placement.Request{Strategy: request.Strategy, Topology: request.Topology}
	for index, bundle := range request.Bundles {
		if _, placed := request.PlacedBundles[index]; placed {
			continue
		}
		out.Bundles = append(out.Bundles, bundle)
		if len(request.BundleLabelSelectors) > 0 {
			out.BundleLabelSelectors = append(out.BundleLabelSelectors, request.BundleLabelSelectors[index])
		}
	}
	return out
}

func newDemand(name string, original placement.Request, count int, shape bool) *demand {
	return newDemandRepeated(name, original, count, shape, false)
}

// newDemandRepeated is newDemand for a request the caller knows to be one bundle
// repeated (repeated: alikeKey said so), which it then does not read again.
func newDemandRepeated(name string, original placement.Request, count int, shape, repeated bool) *demand {
	request := original
	request.PlacedBundles = nil
	request.Workload = nil
	// The bundles are the caller's unless a MIG profile is renamed (countedMIG): nothing
	// changes a request's bundles in place.
	request.Bundles = original.Bundles
	copied := false
	if request.Strategy == "" {
		request.Strategy = placement.StrategyPack
	}
	d := &demand{name: name, original: original, count: count, shape: shape}
	var key strings.Builder
	key.Grow(64)
	key.WriteString(string(request.Strategy))
	key.WriteByte('|')
	key.WriteString(string(request.Topology))
	key.WriteByte('|')
	var seen []string // the distinct bundles' texts: gangs have few
	bundles := original.Bundles
	var entries [8]setEntry
	for index := 0; index < len(bundles); {
		bundle := bundles[index]
		same := entriesOf(entries[:0], bundle)
		// Gangs are mostly runs of equal bundles: the bundles like this
		// one that follow it (without selectors) are this bundle again.
		end := index + 1
		if repeated {
			end = len(bundles)
		} else if len(request.BundleLabelSelectors) == 0 {
			for end < len(bundles) && same.sameAs(bundles[end]) {
				end++
			}
		}
		run := resources.Amount(end - index)
		d.gpus += run * bundle[resources.GPU]
		d.cpus += run * bundle[resources.CPU]
		counted := countedMIG(bundle)
		renamed := !same.sameAs(counted)
		if renamed && !copied {
			request.Bundles, copied = slices.Clone(original.Bundles), true
		}
		if copied {
			for i := index; i < end; i++ {
				request.Bundles[i] = counted
			}
		}
		if bundle[resources.GPU] > 0 || renamed {
			d.anyGPU = true
		}
		var buffer [64]byte
		text := string(appendAmounts(buffer[:0], counted))
		if len(request.BundleLabelSelectors) > 0 {
			text += request.BundleLabelSelectors[index].String()
		}
		d.runs = append(d.runs, bundleRun{start: index, end: end, text: text})
		key.WriteString(text)
		key.WriteByte('*')
		key.WriteString(strconv.Itoa(end - index))
		key.WriteByte(';')
		if !slices.Contains(seen, text) {
			seen = append(seen, text)
			d.distinct = append(d.distinct, counted)
		}
		index = end
	}
	d.request = request
	d.key = key.String()
	return d
}

// bundleRun is a run of equal bundles in a request: Bundles[start:end].
type bundleRun struct {
	start, end int
	text       string
}

// setEntries are a set's amounts read once, to compare many sets with it by lookups
// (sameAs): a gang has up to hundreds of bundles, each a small map, and iterating a map
// costs more than looking names up in it.
type setEntries []setEntry

type setEntry struct {
	name   string
	amount resources.Amount
}

// entriesOf appends the set's entries to buffer.
func entriesOf(buffer []setEntry, set resources.Set) setEntries {
	for name, amount := range set {
		buffer = append(buffer, setEntry{name, amount})
	}
	return buffer
}

// sameAs: the set has exactly these entries.
func (e setEntries) sameAs(set resources.Set) bool {
	if len(set) != len(e) {
		return false
	}
	for _, entry := range e {
		if amount, ok := set[entry.name]; !ok || amount != entry.amount {
			return false
		}
	}
	return true
}

// zero: every amount is 0 (as resources.Set.IsZero).
func (e setEntries) zero() bool {
	for _, entry := range e {
		if entry.amount != 0 {
			return false
		}
	}
	return true
}

// appendSorted appends the entries in name order, as "name=amount," each, sorting them
// in place (a set has few names).
func (e setEntries) appendSorted(key []byte) []byte {
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && e[j].name < e[j-1].name; j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
	for _, entry := range e {
		key = append(key, entry.name...)
		key = append(strconv.AppendInt(append(key, '='), int64(entry.amount), 10), ',')
	}
	return key
}

// appendAmounts appends the set's amounts in name order, without allocating.
func appendAmounts(key []byte, set resources.Set) []byte {
	var buffer [16]setEntry
	return entriesOf(buffer[:0], set).appendSorted(key)
}
