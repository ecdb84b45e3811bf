package raylet

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/mig"
	"github.com/raygo-dev/raygo/internal/resources"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// Ray's default object store size: this share of the node's memory, at most
// objectStoreMaxBytes (ray_constants DEFAULT_OBJECT_STORE_MEMORY_PROPORTION and
// DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES). Ray also caps it by /dev/shm, which holds its
// object store; raygo has none, so that cap does not apply.
const (
	objectStoreMemoryShare = 0.3
	objectStoreMaxBytes    = 200e9
)

// roundAmount rounds to Ray's granularity, a multiple of 1/resources.AmountScale.
func roundAmount(v float64) float64 {
	return math.Round(v*resources.AmountScale) / resources.AmountScale
}

// detectTotals returns the node's resources — detected CPU cores, memory and GPUs,
// Ray's implicit ones (object_store_memory, node:<ip>, node:__internal_head__ on the head),
// then the configured overrides on top — and the whole GPUs offered. GPUs in MIG mode
// (cfg.MIGGPUs) are offered as MIG slices instead, so neither counts nor lists them.
func detectTotals(cfg Config) (map[string]float64, []*pb.GPUInfo) {
	memory := float64(totalMemoryBytes())
	objectStore, set := cfg.Resources[resources.ObjectStoreMemory]
	if !set {
		objectStore = math.Floor(min(memory*objectStoreMemoryShare, objectStoreMaxBytes))
	}
	totals := map[string]float64{
		resources.CPU: float64(runtime.NumCPU()),
		// As Ray's: what the object store takes is not offered as memory.
		resources.Memory:                    max(memory-objectStore, 0),
		resources.ObjectStoreMemory:         objectStore,
		resources.NodeIPPrefix + cfg.NodeIP: 1,
	}
	if cfg.IsHead {
		totals[resources.HeadNode] = 1
	}
	for name, amount := range cfg.Resources {
		totals[name] = roundAmount(amount)
	}
	gpus := cfg.GPUs
	if want, ok := cfg.Resources[resources.GPU]; ok {
		gpus = offeredGPUs(cfg.GPUs, int(want))
	}
	// MIG GPUs: per profile, how many an empty set of them could hold (informational;
	// the slot maps in NodeInfo.mig_gpus are what the scheduler reads). An empty GPU holds
	// a profile's MaxInstances, the MIG User Guide's "instances available" (placement's
	// allocator agrees: TestMIGCapacityIsMaxInstances).
	for _, g := range gpus {
		if !slices.Contains(cfg.MIGGPUs, int(g.Index)) {
			continue
		}
		if model, ok := mig.ModelOfDevice(g.Model); ok {
			for _, profile := range model.Profiles() {
				totals[profile.ResourceName()] += float64(profile.MaxInstances)
			}
		}
	}
	gpus = slices.DeleteFunc(slices.Clone(gpus), func(g *pb.GPUInfo) bool { return slices.Contains(cfg.MIGGPUs, int(g.Index)) })
	totals[resources.GPU] = float64(len(gpus))
	return totals, gpus
}

// offeredGPUs returns the first n discovered GPUs, adding GPUs without topology when n
// exceeds what was discovered (a node told it has GPUs that NVML cannot see).
func offeredGPUs(discovered []*pb.GPUInfo, n int) []*pb.GPUInfo {
	if n <= len(discovered) {
		return discovered[:n]
	}
	out := append([]*pb.GPUInfo{}, discovered...)
	for i := len(discovered); i < n; i++ {
		out = append(out, &pb.GPUInfo{Index: int32(i), NvlinkIsland: -1, Rail: -1})
	}
	return out
}

// totalMemoryBytes reads MemTotal from /proc/meminfo (0 when it cannot be read).
func totalMemoryBytes() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kib * 1024
		}
	}
	return 0
}
