package raylet

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// repartitionWindow is the period MIGRepartitionLimit counts destroy and carve operations
// over.
const repartitionWindow = time.Minute

// migIdleReapBatch bounds the idle instances one pass of the idle loop destroys, so the
// raylet's mutex is never held for long.
const migIdleReapBatch = 16

// migInstance is one carved MIG instance of a GPU in MIG mode: held by a bundle, or idle
// (carved, free for reuse by the same profile at the same start).
type migInstance struct {
	profileID   int
	start, size int
	deviceUUID  string
	held        bool
	holder      bundleID  // when held
	idleSince   time.Time // when idle
}

// migGPU is one GPU in MIG mode with its instances.
type migGPU struct {
	index      int
	uuid       string
	deviceName string // NVML device name: it selects the MIG tables
	model      mig.Model
	instances  []*migInstance // by start
	// recentOps are the times of the destroy and carve operations of the last
	// repartitionWindow; repartitions counts them all since the raylet started.
	recentOps    []time.Time
	repartitions int64
}

func (g *migGPU) find(start int) *migInstance {
	for _, in := range g.instances {
		if in.start == start {
			return in
		}
	}
	return nil
}

func (g *migGPU) add(in *migInstance) {
	g.instances = append(g.instances, in)
	slices.SortFunc(g.instances, func(a, b *migInstance) int { return a.start - b.start })
}

func (g *migGPU) remove(in *migInstance) {
	g.instances = slices.DeleteFunc(g.instances, func(x *migInstance) bool { return x == in })
}

func (g *migGPU) profileName(id int) string {
	if profile, ok := g.model.ProfileByID(id); ok {
		return profile.Name
	}
	return fmt.Sprintf("profile %d", id)
}

// migHold is the MIG instance a reservation holds.
type migHold struct {
	gpu, profileID, start int
	deviceUUID            string
}

// migRequest is one bundle's MIG step in a prepare request.
type migRequest struct {
	id   bundleID
	step *pb.MIGStep
}

// migTable is the raylet's view of its GPUs in MIG mode: which instances exist and which
// bundle holds each. Like bundleTable it is not safe for concurrent use; the raylet
// guards it with its mutex, NVML calls included (carving is rare and correctness first).
type migTable struct {
	manager          *gpu.MIGManager
	gpus             []*migGPU // by index
	idleTimeout      time.Duration
	repartitionLimit int
	log              zerolog.Logger
	// now is the clock; tests replace it.
	now func() time.Time
	// changed is set by every change of the instances, so a refused prepare that
	// destroyed or carved still bumps the resources version.
	changed bool
}

// newMIGTable turns MIG mode on for each of cfg.MIGGPUs and adopts the instances NVML
// already has as idle: a restarted raylet is a new node, so no bundle holds them.
// Instances without a compute instance (a carve cut short) are destroyed.
func newMIGTable(cfg Config, log zerolog.Logger) (*migTable, error) {
	t := &migTable{manager: cfg.MIG, idleTimeout: cfg.MIGIdleTimeout, repartitionLimit: cfg.MIGRepartitionLimit, log: log, now: time.Now}
	now := t.now()
	for _, index := range slices.Sorted(slices.Values(cfg.MIGGPUs)) {
		k := slices.IndexFunc(cfg.GPUs, func(g *pb.GPUInfo) bool { return int(g.GetIndex()) == index })
		if k < 0 {
			return nil, fmt.Errorf("MIG GPU %d: not one of the node's GPUs", index)
		}
		info := cfg.GPUs[k]
		model, ok := mig.ModelOfDevice(info.Model)
		if !ok {
			return nil, fmt.Errorf("MIG GPU %d (%s): %w: no MIG tables for this model", index, info.Model, gpu.ErrMIGUnsupported)
		}
		if err := cfg.MIG.SetMode(index, true); err != nil {
			return nil, err
		}
		found, err := cfg.MIG.Instances(index)
		if err != nil {
			return nil, err
		}
		g := &migGPU{index: index, uuid: info.Uuid, deviceName: info.Model, model: model}
		for _, in := range found {
			if in.DeviceUUID == "" {
				if err := cfg.MIG.Destroy(index, in.Start); err != nil {
					return nil, fmt.Errorf("MIG GPU %d: destroy a half-carved instance: %w", index, err)
				}
				continue
			}
			g.add(&migInstance{profileID: in.ProfileID, start: in.Start, size: in.Size, deviceUUID: in.DeviceUUID, idleSince: now})
		}
		if len(g.instances) > 0 {
			log.Info().Int("gpu", index).Int("instances", len(g.instances)).Msg("adopted existing MIG instances as idle")
		}
		t.gpus = append(t.gpus, g)
	}
	return t, nil
}

func (t *migTable) gpu(index int32) *migGPU {
	for _, g := range t.gpus {
		if int32(g.index) == index {
			return g
		}
	}
	return nil
}

func (t *migTable) indices() []int {
	out := make([]int, len(t.gpus))
	for i, g := range t.gpus {
		out[i] = g.index
	}
	return out
}

// checkStep validates a bundle's MIG step against the tables, before anything is done.
func (t *migTable) checkStep(id bundleID, step *pb.MIGStep, bundle resources.Set) error {
	if t == nil {
		return refusef(ErrMIGNotReady, "bundle %s: mig step on GPU %d, but no GPU of this node is in MIG mode", id, step.Gpu)
	}
	g := t.gpu(step.Gpu)
	if g == nil {
		return refusef(ErrInvalidBundle, "bundle %s: mig.gpu %d is not in MIG mode on this node (MIG GPUs %v)", id, step.Gpu, t.indices())
	}
	profile, ok := g.model.ProfileByID(int(step.ProfileId))
	if !ok {
		return refusef(ErrInvalidBundle, "bundle %s: mig.profile_id %d: GPU %d (%s) has no such profile", id, step.ProfileId, g.index, g.model)
	}
	if !profile.IsValidStart(int(step.Start)) {
		return refusef(ErrInvalidBundle, "bundle %s: mig.start %d: %s starts at %v", id, step.Start, profile.Name, profile.ValidStarts())
	}
	if bundle[resources.GPU] > 0 {
		return refusef(ErrInvalidBundle, "bundle %s: asks for both %s GPU and a MIG slice", id, bundle[resources.GPU])
	}
	for _, name := range bundle.Names() {
		if mig.IsResource(name) && bundle[name] > 0 && name != profile.ResourceName() {
			return refusef(ErrInvalidBundle, "bundle %s: asks for %s but its mig step carves %s", id, name, profile.ResourceName())
		}
	}
	return nil
}

// prepare carries out a prepare request's MIG steps in order and returns the instance
// each bundle now holds. The instances of replaced (older-generation) reservations are
// released first, so a new generation may reuse them. All or nothing: when a step fails,
// the instances taken for earlier steps go idle (they are not destroyed) and the replaced
// reservations get theirs back if they still exist; destroyed instances stay destroyed.
func (t *migTable) prepare(requests []migRequest, replaced map[bundleID]*migHold) ([]migHold, error) {
	now := t.now()
	type release struct {
		g      *migGPU
		in     *migInstance
		holder bundleID
	}
	var released []release
	for id, hold := range replaced {
		if g := t.gpu(int32(hold.gpu)); g != nil {
			if in := g.find(hold.start); in != nil && in.held && in.holder == id {
				in.held, in.idleSince = false, now
				released = append(released, release{g, in, id})
			}
		}
	}
	var taken []*migInstance
	holds := make([]migHold, 0, len(requests))
	for _, req := range requests {
		in, err := t.take(req, now)
		if err != nil {
			for _, in := range taken {
				in.held, in.idleSince = false, now
			}
			for _, r := range released {
				if slices.Contains(r.g.instances, r.in) {
					r.in.held, r.in.holder = true, r.holder
				}
			}
			return nil, err
		}
		taken = append(taken, in)
		holds = append(holds, migHold{gpu: int(req.step.Gpu), profileID: in.profileID, start: in.start, deviceUUID: in.deviceUUID})
	}
	t.changed = true
	return holds, nil
}

// take makes one bundle's instance: destroy the idle instances the step names, then reuse
// an idle instance of the profile at the start or carve one.
func (t *migTable) take(req migRequest, now time.Time) (*migInstance, error) {
	step, id := req.step, req.id
	g := t.gpu(step.Gpu)
	for _, start := range step.DestroyStarts {
		in := g.find(int(start))
		if in == nil {
			continue // already gone: the plan was made on an older report
		}
		if in.held {
			return nil, refusef(ErrMIGNotReady, "bundle %s: GPU %d: cannot destroy the MIG instance at start %d: bundle %s holds it", id, g.index, start, in.holder)
		}
		if err := t.destroy(g, in, now, true); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", id, err)
		}
	}
	start := int(step.Start)
	if in := g.find(start); in != nil {
		switch {
		case in.held:
			return nil, refusef(ErrMIGNotReady, "bundle %s: GPU %d: the MIG slots at start %d are taken: bundle %s holds a %s there", id, g.index, start, in.holder, g.profileName(in.profileID))
		case in.profileID == int(step.ProfileId):
			// An idle instance of the profile is what a carve would make: reuse it even
			// when the plan did not say so, rather than fail.
			in.held, in.holder = true, id
			return in, nil
		}
	}
	if err := t.allowRepartition(g, now); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", id, err)
	}
	carved, err := t.manager.Carve(g.index, int(step.ProfileId), start)
	t.countRepartition(g, now, "carve", int(step.ProfileId), start, err)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", id, err)
	}
	in := &migInstance{profileID: carved.ProfileID, start: carved.Start, size: carved.Size, deviceUUID: carved.DeviceUUID, held: true, holder: id}
	g.add(in)
	t.changed = true
	return in, nil
}

// destroy destroys an idle instance through NVML; limited says whether the
// re-partitioning rate limit applies (it does not to the idle loop's clean-up).
func (t *migTable) destroy(g *migGPU, in *migInstance, now time.Time, limited bool) error {
	if limited {
		if err := t.allowRepartition(g, now); err != nil {
			return err
		}
	}
	err := t.manager.Destroy(g.index, in.start)
	t.countRepartition(g, now, "destroy", in.profileID, in.start, err)
	if err != nil && !errors.Is(err, gpu.ErrMIGInstanceNotFound) {
		return err
	}
	g.remove(in)
	t.changed = true
	return nil
}

// allowRepartition refuses an operation beyond MIGRepartitionLimit in the last minute.
func (t *migTable) allowRepartition(g *migGPU, now time.Time) error {
	g.recentOps = slices.DeleteFunc(g.recentOps, func(at time.Time) bool { return now.Sub(at) >= repartitionWindow })
	if len(g.recentOps) >= t.repartitionLimit {
		return refusef(ErrMIGNotReady, "GPU %d: MIG re-partitioning rate limit: %d destroy and carve operations in the last %s (limit %d)",
			g.index, len(g.recentOps), repartitionWindow, t.repartitionLimit)
	}
	return nil
}

// countRepartition counts an attempted destroy or carve and logs it with the running count.
func (t *migTable) countRepartition(g *migGPU, now time.Time, op string, profileID, start int, err error) {
	g.recentOps = append(g.recentOps, now)
	g.repartitions++
	event := t.log.Info()
	if err != nil {
		event = t.log.Warn().Err(err)
	}
	event.Int("gpu", g.index).Str("op", op).Str("profile", g.profileName(profileID)).Int("start", start).
		Int64("repartitions", g.repartitions).Msg("MIG re-partition")
}

// release makes a cancelled or released bundle's instance idle; it stays carved.
func (t *migTable) release(id bundleID, hold *migHold) {
	g := t.gpu(int32(hold.gpu))
	if g == nil {
		return
	}
	if in := g.find(hold.start); in != nil && in.held && in.holder == id {
		in.held, in.idleSince = false, t.now()
		t.changed = true
	}
}

// reapIdle destroys up to migIdleReapBatch instances idle for MIGIdleTimeout or longer,
// and returns how many it destroyed. A failed destroy is logged and retried next pass.
func (t *migTable) reapIdle() int {
	now := t.now()
	destroyed := 0
	for _, g := range t.gpus {
		for _, in := range slices.Clone(g.instances) {
			if in.held || now.Sub(in.idleSince) < t.idleTimeout || destroyed >= migIdleReapBatch {
				continue
			}
			if err := t.destroy(g, in, now, false); err != nil {
				t.log.Warn().Err(err).Int("gpu", g.index).Int("start", in.start).Msg("could not destroy an idle MIG instance")
				continue
			}
			destroyed++
		}
	}
	return destroyed
}

// takeChanged reports whether the instances changed since the last call.
func (t *migTable) takeChanged() bool {
	if t == nil {
		return false
	}
	changed := t.changed
	t.changed = false
	return changed
}

// report is the slot maps as NodeInfo.mig_gpus and ResourceReport.mig_gpus carry them.
func (t *migTable) report() []*pb.MIGGPUInfo {
	if t == nil {
		return nil
	}
	out := make([]*pb.MIGGPUInfo, 0, len(t.gpus))
	for _, g := range t.gpus {
		row := &pb.MIGGPUInfo{Index: int32(g.index), Uuid: g.uuid, Model: g.deviceName}
		for _, in := range g.instances {
			row.Instances = append(row.Instances, &pb.MIGInstanceInfo{ProfileId: int32(in.profileID), Start: int32(in.start), Held: in.held, DeviceUuid: in.deviceUUID})
		}
		out = append(out, row)
	}
	return out
}

// repartitions is the count of destroy and carve operations on a MIG GPU since start.
func (t *migTable) repartitions(index int) int64 {
	if t == nil {
		return 0
	}
	if g := t.gpu(int32(index)); g != nil {
		return g.repartitions
	}
	return 0
}
