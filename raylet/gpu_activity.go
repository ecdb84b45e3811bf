package raylet

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu"
)

// Allocated versus used: the raylet samples each GPU's activity (Config.GPUActivity, every
// Config.GPUActivityInterval) in its own goroutine, and /metrics shows the last sample with
// DCGM's names and labels, and the GPUs bundles hold that have done nothing for a while.
// A scrape never calls NVML.

const (
	// gpuIdleBelow is the SM activity (0 to 1) under which a GPU counts as idle.
	gpuIdleBelow = 0.10
	// gpuIdleFor is how long a GPU a bundle holds must stay idle to be counted in
	// raygo_raylet_gpus_allocated_idle.
	gpuIdleFor = 10 * time.Minute
)

// allocatedIdle finds the whole GPUs a bundle holds whose SM activity has stayed under
// gpuIdleBelow in every sample for gpuIdleFor. Time is an input; not safe for concurrent
// use.
type allocatedIdle struct {
	spells map[string]idleSpell // by GPU UUID
}

// idleSpell: the GPU, held by group, has been idle in every sample since since.
type idleSpell struct {
	group string
	since time.Time
}

// observe records a sample taken at now: busy is each measured GPU's SM activity by
// UUID, held the placement group holding each GPU bundles hold. A GPU not measured
// is not idle: nothing is known of it.
func (a *allocatedIdle) observe(now time.Time, busy map[string]float64, held map[string]string) {
	if a.spells == nil {
		a.spells = map[string]idleSpell{}
	}
	for uuid, spell := range a.spells {
		activity, measured := busy[uuid]
		if held[uuid] != spell.group || !measured || activity >= gpuIdleBelow {
			delete(a.spells, uuid)
		}
	}
	for uuid, group := range held {
		if activity, measured := busy[uuid]; measured && activity < gpuIdleBelow {
			if _, idle := a.spells[uuid]; !idle {
				a.spells[uuid] = idleSpell{group: group, since: now}
			}
		}
	}
}

// idleByGroup counts, for each group in held, its GPUs idle for gpuIdleFor at now.
func (a *allocatedIdle) idleByGroup(now time.Time, held map[string]string) map[string]int {
	counts := map[string]int{}
	for uuid, group := range held {
		counts[group] += 0
		if spell, ok := a.spells[uuid]; ok && spell.group == group && now.Sub(spell.since) >= gpuIdleFor {
			counts[group]++
		}
	}
	return counts
}

// gpuActivity is the last sample and what it says of the GPUs bundles hold; the sampling
// goroutine writes it, scrapes read it.
type gpuActivity struct {
	mu        sync.Mutex
	last      []gpu.Activity
	sampledAt time.Time
	held      map[string]string // GPU UUID → placement group, at the last sample
	idle      allocatedIdle
}

// record stores a sample taken at now while the bundles held the GPUs in held.
func (g *gpuActivity) record(now time.Time, sample []gpu.Activity, held map[string]string) {
	busy := map[string]float64{}
	for _, a := range sample {
		if a.MIG != nil {
			continue
		}
		if activity, ok := a.SMBusy(); ok {
			busy[a.UUID] = activity
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idle.observe(now, busy, held)
	g.last, g.sampledAt, g.held = sample, now, held
}

// idleGPUs is the groups with GPUs idle for gpuIdleFor at the last sample, for the
// heartbeat (nil when there are none).
func (g *gpuActivity) idleGPUs() map[string]int32 {
	_, byGroup := g.snapshot()
	var out map[string]int32
	for group, n := range byGroup {
		if n > 0 {
			if out == nil {
				out = map[string]int32{}
			}
			out[group] = int32(n)
		}
	}
	return out
}

// reported is the last sample as the heartbeat carries it: each measured GPU's and MIG
// instance's SM activity and memory used (nil before the first sample).
func (g *gpuActivity) reported() []*pb.GPUActivity {
	sample, _ := g.snapshot()
	var out []*pb.GPUActivity
	for _, a := range sample {
		busy, measured := a.SMBusy()
		if !measured && !a.HasMemory {
			continue
		}
		row := &pb.GPUActivity{GpuIndex: int32(a.GPU), HasSmActive: measured, SmActive: busy, HasMemory: a.HasMemory, FbUsedBytes: a.FBUsedBytes}
		if a.MIG != nil {
			row.MigDeviceUuid = a.MIG.DeviceUUID
		}
		out = append(out, row)
	}
	return out
}

// snapshot is the last sample and the idle GPUs by group then.
func (g *gpuActivity) snapshot() ([]gpu.Activity, map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sampledAt.IsZero() {
		return nil, nil
	}
	return g.last, g.idle.idleByGroup(g.sampledAt, g.held)
}

// heldGPUs maps the UUID of each whole GPU a committed bundle holds to its placement
// group.
func (r *Raylet) heldGPUs() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	uuids := map[int32]string{}
	for _, g := range r.bundles.gpus {
		uuids[g.GetIndex()] = g.GetUuid()
	}
	held := map[string]string{}
	for id, res := range r.bundles.reserved {
		if !res.committed || res.mig != nil {
			continue
		}
		for _, index := range res.gpuIDs {
			if uuid, ok := uuids[index]; ok {
				held[uuid] = id.placementGroupID
			}
		}
	}
	return held
}

// gpuActivityLoop samples until Stop, then closes the sampler. Without NVML it logs
// once and stops sampling; /metrics then shows no activity.
func (r *Raylet) gpuActivityLoop() {
	sampler := r.cfg.GPUActivity
	defer sampler.Close()
	ticker := time.NewTicker(r.cfg.GPUActivityInterval)
	defer ticker.Stop()
	failing := false
	for {
		sample, err := sampler.Sample()
		switch {
		case errors.Is(err, gpu.ErrNVMLUnavailable):
			r.log.Info().Err(err).Msg("GPU activity not sampled: NVML is not available")
			return
		case err != nil:
			if !failing {
				r.log.Warn().Err(err).Msg("GPU activity sample failed; retrying every interval")
			}
			failing = true
		default:
			failing = false
			r.activity.record(time.Now(), sample, r.heldGPUs())
		}
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		}
	}
}

// gpuActivityCollector exports the last sample under DCGM's names and labels, so boards
// and rules written for dcgm-exporter read raygo's nodes, and raygo_raylet_gpus_allocated_idle.
type gpuActivityCollector struct {
	activity                               *gpuActivity
	hostname                               string
	smActive, grEngineActive, util, fbUsed *prometheus.Desc
	allocatedIdle                          *prometheus.Desc
}

// dcgmLabels are dcgm-exporter's labels: GPU_I_PROFILE and GPU_I_ID are empty for a
// whole GPU (Prometheus drops empty labels).
var dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname", "GPU_I_PROFILE", "GPU_I_ID"}

func newGPUActivityCollector(nodeID string, activity *gpuActivity) *gpuActivityCollector {
	hostname, _ := os.Hostname()
	return &gpuActivityCollector{activity: activity, hostname: hostname,
		smActive:       prometheus.NewDesc("DCGM_FI_PROF_SM_ACTIVE", "Ratio of SMs busy over the last sampling interval (NVML GPM SM utilization), 0 to 1.", dcgmLabels, nil),
		grEngineActive: prometheus.NewDesc("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine was active over the last sampling interval (NVML GPM graphics utilization), 0 to 1.", dcgmLabels, nil),
		util:           prometheus.NewDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (NVML utilization rates), in %.", dcgmLabels, nil),
		fbUsed:         prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Frame buffer memory used, in MiB.", dcgmLabels, nil),
		allocatedIdle: prometheus.NewDesc("raygo_raylet_gpus_allocated_idle",
			"Whole GPUs a placement group's bundles hold whose SM activity stayed under 10 % for 10 minutes.",
			[]string{"placement_group_id"}, prometheus.Labels{"node_id": nodeID}),
	}
}

func (c *gpuActivityCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *gpuActivityCollector) Collect(ch chan<- prometheus.Metric) {
	sample, idle := c.activity.snapshot()
	gauge := func(desc *prometheus.Desc, value float64, labels []string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, value, labels...)
	}
	for _, a := range sample {
		labels := []string{strconv.Itoa(a.GPU), a.UUID, "nvidia" + strconv.Itoa(a.GPU), a.Model, c.hostname, "", ""}
		if a.MIG != nil {
			labels[5], labels[6] = a.MIG.Profile, strconv.Itoa(a.MIG.GPUInstanceID)
		}
		if a.HasGPM {
			gauge(c.smActive, a.SMActive, labels)
			gauge(c.grEngineActive, a.GraphicsActive, labels)
		}
		if a.HasUtilization {
			gauge(c.util, a.Utilization*100, labels)
		}
		if a.HasMemory {
			gauge(c.fbUsed, float64(a.FBUsedBytes)/(1<<20), labels)
		}
	}
	for group, count := range idle {
		gauge(c.allocatedIdle, float64(count), []string{group})
	}
}
