package raylet

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The raylet's /metrics (Config.MetricsAddress, `raygo start --metrics-export-port` as
// Ray's flag): its resources, the bundles it holds, and each GPU's allocation with
// DCGM's labels (gpu, UUID, modelName) so boards keyed on them join. Read at each scrape.

type rayletCollector struct {
	r                                       *Raylet
	total, available, bundles, gpuAllocated *prometheus.Desc
}

func newRayletCollector(r *Raylet) *rayletCollector {
	node := prometheus.Labels{"node_id": r.cfg.NodeID}
	return &rayletCollector{r: r,
		total:        prometheus.NewDesc("raygo_raylet_resources_total", "The node's resources.", []string{"resource"}, node),
		available:    prometheus.NewDesc("raygo_raylet_resources_available", "The node's resources no bundle, actor or task holds.", []string{"resource"}, node),
		bundles:      prometheus.NewDesc("raygo_raylet_bundles", "Placement-group bundles the raylet holds, by state (prepared, committed).", []string{"state"}, node),
		gpuAllocated: prometheus.NewDesc("raygo_raylet_gpu_allocated", "Share of each whole GPU held by bundles, 0 to 1.", []string{"gpu", "UUID", "modelName"}, node),
	}
}

func (c *rayletCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *rayletCollector) Collect(ch chan<- prometheus.Metric) {
	stats, err := (&nodeManagerService{raylet: c.r}).GetNodeStats(context.Background(), &pb.GetNodeStatsRequest{})
	if err != nil {
		return
	}
	gauge := func(desc *prometheus.Desc, value float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, value, labels...)
	}
	for name, amount := range stats.Node.ResourcesTotal {
		gauge(c.total, amount, name)
	}
	for name, amount := range stats.Node.ResourcesAvailable {
		gauge(c.available, amount, name)
	}
	states := map[string]float64{"prepared": 0, "committed": 0}
	held := map[int32]float64{}
	for _, b := range stats.Bundles {
		switch b.State {
		case pb.BundleReservationState_BUNDLE_PREPARED:
			states["prepared"]++
		case pb.BundleReservationState_BUNDLE_COMMITTED:
			states["committed"]++
		}
		if b.Mig != nil {
			continue // a MIG slice holds no whole GPU
		}
		share := min(b.Resources["GPU"], 1)
		for _, gpu := range b.GpuIds {
			held[gpu] += share
		}
	}
	for state, count := range states {
		gauge(c.bundles, count, state)
	}
	for _, gpu := range stats.Node.Gpus {
		gauge(c.gpuAllocated, min(held[gpu.Index], 1), strconv.Itoa(int(gpu.Index)), gpu.Uuid, gpu.Model)
	}
}
