// Package gpu owns what a raylet knows about its node's GPUs: discovery through NVML
// (go-nvml), the NVLink islands and multi-node NVLink domain, the GPU ↔ NIC ↔ rail map read
// from the PCI tree in sysfs, and MIG carving. The simulated machines behind
// `raygo start --gpu-sim` are package gpusim, written apart from this one. It returns plain Go values; the raylet turns them into protos (GPUInfo, NodeInfo
// nvlink_domain) and labels, so this package has no gRPC.
//
// Discovery:
//   - Discover lists GPUs (index, UUID, model, memory); DiscoverTopology adds the PCI bus id,
//     NVLink island, fabric clique, closest NIC and rail, and Ray's accelerator type.
//   - Without the NVIDIA driver (no libnvidia-ml.so) both return an error wrapping
//     ErrNVMLUnavailable and make no NVML call after the failed Init: after a failed Init an
//     NVML call can crash the process. The caller logs it once and reports no GPUs.
//   - Topology queries a GPU or driver does not support degrade to "unknown": no NVLink peer
//     (NoIsland), no clique, no rail (NoRail). Newer NVML functions are called only when
//     the loaded library exports them; go-nvml binds symbols lazily and a missing one can
//     abort the process.
//   - Islands: GPUs joined by an active NVLink to each other, or attached to NVSwitches and
//     allowed NVLink P2P, form an island (nvlinkComponents states the rule). A node whose
//     GPUs all completed fabric registration in one clique (GB200 NVL72) reports the NVLink
//     domain "<ClusterUuid>/<CliqueId>"; its islands span the domain's nodes.
//   - Rails: each GPU's closest InfiniBand NIC by PCIe hops, rail = the NIC's position in
//     name order (mapRails states the rule).
//
// MIG (mig.go): MIGManager turns a GPU's MIG mode on and off, carves an instance of an
// NVML profile id at an explicit start (GPU instance with that placement, then its
// default compute instance) and returns its "MIG-…" device UUID, destroys one (compute
// instances first), and lists the instances that exist, as a restarted raylet must.
// Which profile and start is placement's decision (placement.PlanMIG); this package only
// carries it out. Profiles are the ids hardware reports (mig.Profile.ID): NVML
// is asked by profile enum and answers the id, and the manager learns that mapping from
// NVML; the simulation's side of it is gpusim's table of profile enums.
//
// Activity (activity.go): ActivitySampler reads each GPU's activity and memory used, per
// MIG instance for a GPU in MIG mode: SM and graphics activity through GPU performance
// monitoring (GPM, Hopper and later, between consecutive samples), the utilization rate
// otherwise, as DCGM's fields. Without NVML it returns ErrNVMLUnavailable and calls
// nothing more; the GPM functions are called only when the library exports them.
//
// Concurrency: DiscoverTopology and Discover may run concurrently with each other (NVML
// Init/Shutdown are reference-counted); a MIGManager is safe for concurrent use and
// serializes its calls; an ActivitySampler is used by one goroutine at a time, alongside
// a MIGManager on the same library.
package gpu
