// Package pbplacement turns a node's GPU rows as the raylet reports them (protos'
// GPUInfo and MIGGPUInfo) into the placement core's terms. The GCS builds its scheduling
// view with it and the autoscaler its picture of the cluster, so both read a node's GPUs
// the same way. It does no I/O.
package pbplacement

import (
	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/placement"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// GPUs lists a node's whole GPUs for placement with what is free of each: used maps a
// GPU index to the share of it bundles hold. GPUs the raylet only counted (--num-gpus
// without NVML: no UUID, no topology), or a list that does not match the node's GPU
// total, give nil: the node is then scheduled by its GPU count and the raylet picks the
// indices, rather than one odd node failing a snapshot.
func GPUs(gpus []*pb.GPUInfo, totalGPUs float64, used map[int]resources.Amount) []placement.GPU {
	if float64(len(gpus)) != totalGPUs {
		return nil
	}
	out := make([]placement.GPU, 0, len(gpus))
	for _, g := range gpus {
		if g.Uuid == "" {
			return nil
		}
		out = append(out, placement.GPU{Index: int(g.Index), UUID: g.Uuid, NVLinkIsland: int(g.NvlinkIsland),
			Rail: int(g.Rail), Available: max(resources.AmountScale-used[int(g.Index)], 0)})
	}
	return out
}

// MIGGPUs is a node's MIG slot maps as its raylet last reported them; GPUs of a model
// raygo has no MIG table for are left out. The raylet checks every step again, so a plan
// made on a report that an in-flight prepare has outdated fails its prepare and is
// retried, never double-booked.
func MIGGPUs(gpus []*pb.MIGGPUInfo) []placement.MIGGPU {
	var out []placement.MIGGPU
	for _, g := range gpus {
		model, ok := mig.ModelOfDevice(g.Model)
		if !ok {
			continue
		}
		gpu := placement.MIGGPU{Index: int(g.Index), Model: model}
		for _, in := range g.Instances {
			state := placement.MIGIdle
			if in.Held {
				state = placement.MIGHeld
			}
			gpu.Instances = append(gpu.Instances, placement.MIGInstance{ProfileID: int(in.ProfileId), Start: int(in.Start), State: state})
		}
		out = append(out, gpu)
	}
	return out
}
