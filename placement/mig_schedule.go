package placement

import (
	"errors"
	"fmt"
	"slices"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
)

// MIG bundles in the scheduler. A bundle asking for a MIG profile
// ({"nvidia.com/mig-1g.10gb": 1, "CPU": 2}) takes one instance on one of its node's MIG
// GPUs (Node.MIGGPUs), which PlanMIG chooses with the exact geometry: reuse an idle
// instance of the profile, carve in free slices, or destroy idle instances first. The
// profile is not a resource column: stage 4 checks the bundle's other resources, and
// stage 5 asks PlanMIG against the node's slot maps as the attempt has changed them,
// so several MIG bundles of a group on one node see each other's steps. Nodes without
// MIG GPUs take no MIG bundle and pay nothing for the feature.
//
// The capacity view (Infeasible or NotNow) sees every MIG GPU empty: held and idle
// instances may all go in time. The group's own placed MIG bundles are not subtracted
// from it (their slots are not in Request.PlacedBundles), so a rescheduled group may be
// told NotNow where only other nodes would help.

// MIG preference of a placement, lower first: what the step costs the node's GPUs. It is
// a strategy preference ahead of best fit, so a MIG bundle goes where the profile is
// already carved and idle, then to a partitioned GPU, and keeps empty GPUs whole.
const (
	migRankReuse       = 0 // an idle instance of the profile is reused
	migRankPartitioned = 1 // carved on a GPU that already has instances
	migRankEmptyGPU    = 2 // carved on an empty GPU
	migRankDestroy     = 3 // idle instances are destroyed first
)

// cloneMIGGPUs copies slot maps; nil for none.
func cloneMIGGPUs(gpus []MIGGPU) []MIGGPU {
	if len(gpus) == 0 {
		return nil
	}
	out := make([]MIGGPU, len(gpus))
	for i, gpu := range gpus {
		out[i] = MIGGPU{Index: gpu.Index, Model: gpu.Model, Instances: slices.Clone(gpu.Instances)}
	}
	return out
}

// emptyMIGGPUs is gpus with every instance gone: the capacity view.
func emptyMIGGPUs(gpus []MIGGPU) []MIGGPU {
	out := make([]MIGGPU, len(gpus))
	for i, gpu := range gpus {
		out[i] = MIGGPU{Index: gpu.Index, Model: gpu.Model}
	}
	return out
}

// checkMIGGPUs validates node.MIGGPUs: valid slot maps (MIGGPU.Validate), unique
// indices >= 0, none also listed as a whole GPU.
func checkMIGGPUs(field string, node Node) error {
	for i, gpu := range node.MIGGPUs {
		gpuField := fmt.Sprintf("%s.mig_gpus[%d]", field, i)
		if gpu.Index < 0 {
			return fielderr.New(ErrInvalidSnapshot, gpuField+".index", "must be >= 0, got %d", gpu.Index)
		}
		if err := gpu.Validate(); err != nil {
			return fielderr.New(ErrInvalidSnapshot, gpuField, "%v", err)
		}
		for j, other := range node.MIGGPUs[:i] {
			if other.Index == gpu.Index {
				return fielderr.New(ErrInvalidSnapshot, gpuField+".index", "duplicate MIG GPU index %d (also mig_gpus[%d])", gpu.Index, j)
			}
		}
		for j, whole := range node.GPUs {
			if whole.Index == gpu.Index {
				return fielderr.New(ErrInvalidSnapshot, gpuField+".index",
					"GPU %d is in MIG mode and also listed as a whole GPU (gpus[%d])", gpu.Index, j)
			}
		}
	}
	return nil
}

// migResourceOf returns the bundle's MIG resource name ("" for none): at most one,
// as validation ensures.
func migResourceOf(bundle resources.Set) string {
	for name, amount := range bundle {
		if amount > 0 && mig.IsResource(name) {
			return name
		}
	}
	return ""
}

// migReservation is one MIG step of a plan, for Reserve and Release.
type migReservation struct {
	bundle int
	step   MIGStep
}

// addMIGDemand checks a placement's MIG step against its bundle and node and records
// it; it returns the placement with only its whole-GPU indices, for addGPUDemand.
func (s *Snapshot) addMIGDemand(demand *nodeDemand, node int, placement BundlePlacement, bundle resources.Set) (BundlePlacement, error) {
	resource := migResourceOf(bundle)
	switch {
	case resource == "" && placement.MIG == nil:
		return placement, nil
	case resource == "":
		return placement, fmt.Errorf("%w: bundle %d asks no MIG profile, the plan gives it a MIG step (%s)",
			ErrInvalidGPUAssignment, placement.BundleIndex, placement.MIG)
	case placement.MIG == nil:
		return placement, fmt.Errorf("%w: bundle %d asks %s, the plan gives it no MIG step",
			ErrInvalidGPUAssignment, placement.BundleIndex, resource)
	}
	step := *placement.MIG
	if name, _ := mig.ProfileName(resource); step.Profile.Name != name {
		return placement, fmt.Errorf("%w: bundle %d asks %s, its MIG step is for %s",
			ErrInvalidGPUAssignment, placement.BundleIndex, resource, step.Profile.Name)
	}
	k := slices.Index(placement.GPUIndices, step.GPU)
	if k < 0 {
		return placement, fmt.Errorf("%w: bundle %d: GPU indices %v lack the MIG step's GPU %d",
			ErrInvalidGPUAssignment, placement.BundleIndex, placement.GPUIndices, step.GPU)
	}
	demand.mig[node] = append(demand.mig[node], migReservation{bundle: placement.BundleIndex, step: step})
	placement.GPUIndices = slices.Delete(slices.Clone(placement.GPUIndices), k, k+1)
	return placement, nil
}

// migAfter returns, per node with MIG steps in demand, its slot maps with the steps
// applied (reserve) or their instances returned to the idle pool (release), without
// changing the snapshot: errors wrap ErrInvalidGPUAssignment and name the bundle.
func (s *Snapshot) migAfter(demand nodeDemand, reserve bool) (map[int][]MIGGPU, error) {
	if len(demand.mig) == 0 {
		return nil, nil
	}
	after := make(map[int][]MIGGPU, len(demand.mig))
	for _, node := range demand.nodes {
		steps := demand.mig[node]
		if len(steps) == 0 {
			continue
		}
		gpus := cloneMIGGPUs(s.mig[node])
		for _, reservation := range steps {
			step := reservation.step
			k := slices.IndexFunc(gpus, func(gpu MIGGPU) bool { return gpu.Index == step.GPU })
			if k < 0 {
				return nil, fmt.Errorf("%w: bundle %d: node %s has no MIG GPU %d",
					ErrInvalidGPUAssignment, reservation.bundle, s.nodes[node].id, step.GPU)
			}
			var err error
			switch {
			case reserve:
				err = gpus[k].Apply(step)
			case !slices.Contains(gpus[k].Instances, MIGInstance{ProfileID: step.Profile.ID, Start: step.Start, State: MIGHeld}):
				err = fmt.Errorf("no held %s instance at %d (released twice?)", step.Profile.Name, step.Start)
			default:
				err = gpus[k].Release(step.Start)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: bundle %d on node %s: %w", ErrInvalidGPUAssignment, reservation.bundle, s.nodes[node].id, err)
			}
		}
		after[node] = gpus
	}
	return after, nil
}

// migGPUs returns node's MIG slot maps as the attempt sees them: changed by the
// group's MIG bundles placed in it, else the snapshot's (every GPU empty in the
// capacity view). Callers must not change the result.
func (a *attempt) migGPUs(node int) []MIGGPU {
	if held := a.groupNode(node); held != nil && held.mig != nil {
		return held.mig
	}
	base := a.snapshot.mig[node]
	if a.view == viewCapacity && len(base) > 0 {
		return emptyMIGGPUs(base)
	}
	return base
}

// planMIGOn runs PlanMIG on gpus and ranks the step (migRank*); a node without MIG GPUs
// gets errNoMIGGPUs without an allocation, as it is asked for every MIG bundle.
func planMIGOn(gpus []MIGGPU, resource string) (MIGStep, int, error) {
	if len(gpus) == 0 {
		return MIGStep{}, 0, errNoMIGGPUs
	}
	step, err := PlanMIG(gpus, resource, MIGBestFit)
	if err != nil {
		return MIGStep{}, 0, err
	}
	switch {
	case step.Action == MIGReuseIdle:
		return step, migRankReuse, nil
	case len(step.Destroy) > 0:
		return step, migRankDestroy, nil
	}
	for _, gpu := range gpus {
		if gpu.Index == step.GPU && len(gpu.Instances) > 0 {
			return step, migRankPartitioned, nil
		}
	}
	return step, migRankEmptyGPU, nil
}

// applyMIGStep returns gpus with step applied, copying the outer slice (Apply copies
// the instances), so gpus itself is left as it was.
func applyMIGStep(gpus []MIGGPU, step MIGStep) ([]MIGGPU, error) {
	out := slices.Clone(gpus)
	for k := range out {
		if out[k].Index == step.GPU {
			return out, out[k].Apply(step)
		}
	}
	return nil, fmt.Errorf("%w: no MIG GPU %d", ErrInvalidMIGState, step.GPU)
}

// migFitsBundle is stage 5 for a bundle's MIG profile: whether node's MIG GPUs can take
// it now, and the placement's rank. True for a bundle without one.
func (d *decision) migFitsBundle(a *attempt, node int, bundle *bundleDemand) (bool, int) {
	if bundle.mig == "" {
		return true, 0
	}
	_, rank, err := planMIGOn(a.migGPUs(node), bundle.mig)
	return err == nil, rank
}

// migFitsGroup is stage 5 for every MIG bundle of the group on node, in placement order
// as assign will place them: the sum of their ranks, or the position of the first that
// does not fit (else -1) and PlanMIG's error.
func (d *decision) migFitsGroup(a *attempt, node int) (ranks, failed int, err error) {
	if !d.hasMIG {
		return 0, -1, nil
	}
	gpus := a.migGPUs(node)
	for position := range d.bundles {
		resource := d.bundles[position].mig
		if resource == "" {
			continue
		}
		step, rank, err := planMIGOn(gpus, resource)
		if err == nil {
			gpus, err = applyMIGStep(gpus, step)
		}
		if err != nil {
			return 0, position, err
		}
		ranks += rank
	}
	return ranks, -1, nil
}

// migTakes returns how many (up to count) bundles of resource trial can take, applying
// their steps to *trial.
func migTakes(trial *[]MIGGPU, resource string, count int) int {
	for taken := range count {
		step, _, err := planMIGOn(*trial, resource)
		if err != nil {
			return taken
		}
		next, err := applyMIGStep(*trial, step)
		if err != nil {
			return taken
		}
		*trial = next
	}
	return count
}

// assignMIG places the MIG profile of the bundle at position on node (already checked
// to fit): the step is recorded and applied to the attempt's slot maps of the node.
func (d *decision) assignMIG(a *attempt, position, node int, held *groupNode) {
	bundle := &d.bundles[position]
	if bundle.mig == "" {
		return
	}
	gpus := a.migGPUs(node)
	step, _, err := planMIGOn(gpus, bundle.mig)
	if err == nil {
		held.mig, err = applyMIGStep(gpus, step)
	}
	if err != nil {
		if a.broken == nil {
			a.broken = fmt.Errorf("%w: bundle %d was placed on node %s, whose MIG GPUs cannot take it: %w",
				ErrInternal, bundle.index, d.snapshot.nodes[node].id, err)
		}
		return
	}
	if a.migSteps == nil {
		a.migSteps = make([]*MIGStep, len(d.bundles))
	}
	a.migSteps[position] = &step
}

// migRejection is stage 5 for MIG with a reason, for a node whose resources pass.
func (d *decision) migRejection(a *attempt, node int, check *rejectionCheck) (Reason, bool) {
	var resource string
	var err error
	if check.position >= 0 {
		resource = d.bundles[check.position].mig
		if resource == "" {
			return Reason{}, false
		}
		_, _, err = planMIGOn(a.migGPUs(node), resource)
	} else {
		var failed int
		if _, failed, err = d.migFitsGroup(a, node); failed >= 0 {
			resource = d.bundles[failed].mig
		}
	}
	if err == nil {
		return Reason{}, false
	}
	reason := Reason{Code: ReasonMIGNoRoom, Resource: resource, Want: resources.AmountScale}
	switch {
	case errors.Is(err, ErrMIGProfileUnsupported):
		reason.Code = ReasonMIGProfileUnsupported
	case a.view == viewCapacity:
		reason.Code = ReasonMIGTooFewSlices
	}
	return reason, true
}
