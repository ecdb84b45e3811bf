package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
	"github.com/raygo-dev/raygo/tests/harness"
)

// rayletMetricsAddress is where the node's raylet serves /metrics, from its log (the
// port was 0: a free one).
func rayletMetricsAddress(t *testing.T, node *harness.Node) string {
	t.Helper()
	var address string
	harness.Eventually(t, 30*time.Second, "the raylet logs its /metrics address", func() error {
		log, err := os.Open(filepath.Join(node.LogDir, "raylet.log"))
		if err != nil {
			return err
		}
		defer log.Close()
		lines := bufio.NewScanner(log)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var entry struct{ Message, Address string }
			if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Message == "serving /metrics" {
				address = entry.Address
				return nil
			}
		}
		return fmt.Errorf("no \"serving /metrics\" line yet")
	})
	return address
}

// labelsOf maps a series' label names to values.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.Label {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// A raylet on a simulated DGX H100 exports each GPU's activity under DCGM's names and
// labels, read through GPM from the simulator's control file; a change of the file shows
// at the next sample, and the group holding GPUs has its raygo_raylet_gpus_allocated_idle series.
func TestRayletExportsSimulatedGPUActivityAsDCGM(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")
	node := c.AddNode("--gpu-sim", "dgx-h100", "--metrics-export-port", "0", "--gpu-activity-interval", "200ms")
	address := rayletMetricsAddress(t, node)
	control := filepath.Join(node.SessionDir, gpusim.ActivityFileName)

	uuids := map[string]string{} // gpu index → UUID
	harness.Eventually(t, 30*time.Second, "DCGM_FI_PROF_SM_ACTIVE for 8 idle GPUs", func() error {
		families, err := harness.Scrape(t, address)
		if err != nil {
			return err
		}
		series := families["DCGM_FI_PROF_SM_ACTIVE"].GetMetric()
		if len(series) != 8 {
			return fmt.Errorf("%d DCGM_FI_PROF_SM_ACTIVE series, want 8", len(series))
		}
		for _, m := range series {
			labels := labelsOf(m)
			if labels["UUID"] == "" || labels["modelName"] != "NVIDIA H100 80GB HBM3" || labels["Hostname"] == "" || labels["device"] != "nvidia"+labels["gpu"] {
				return fmt.Errorf("labels %v", labels)
			}
			if m.GetGauge().GetValue() != 0 {
				return fmt.Errorf("GPU %s at %v before any activity", labels["gpu"], m.GetGauge().GetValue())
			}
			uuids[labels["gpu"]] = labels["UUID"]
		}
		return nil
	})

	if err := gpusim.WriteSimActivity(control, gpusim.SimActivityFile{GPUs: map[string]gpusim.SimActivity{
		uuids["5"]: {SMActive: 0.65, GrEngineActive: 0.7, FBUsedBytes: 20 << 30},
	}}); err != nil {
		t.Fatal(err)
	}
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reply, err := pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "STRICT_PACK", Lifetime: "detached",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"GPU": 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	group := reply.PlacementGroup.PlacementGroupId
	harness.Eventually(t, 30*time.Second, "GPU 5's new activity and the group's idle series", func() error {
		families, err := harness.Scrape(t, address)
		if err != nil {
			return err
		}
		if got, _ := harness.MetricValue(families, "DCGM_FI_PROF_SM_ACTIVE", "UUID", uuids["5"]); got != 0.65 {
			return fmt.Errorf("SM activity of GPU 5 = %v, want 0.65", got)
		}
		if got, _ := harness.MetricValue(families, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "UUID", uuids["5"]); got != 0.7 {
			return fmt.Errorf("graphics activity of GPU 5 = %v, want 0.7", got)
		}
		if got, _ := harness.MetricValue(families, "DCGM_FI_DEV_FB_USED", "UUID", uuids["5"]); got != 20<<10 {
			return fmt.Errorf("memory used on GPU 5 = %v MiB, want %d", got, 20<<10)
		}
		if got, _ := harness.MetricValue(families, "DCGM_FI_PROF_SM_ACTIVE", "UUID", uuids["4"]); got != 0 {
			return fmt.Errorf("SM activity of GPU 4 = %v, want 0", got)
		}
		// Held for seconds, not 10 minutes: listed, none idle yet.
		if got, ok := harness.MetricValue(families, "raygo_raylet_gpus_allocated_idle", "placement_group_id", group); !ok || got != 0 {
			return fmt.Errorf("raygo_raylet_gpus_allocated_idle{placement_group_id=%s} = %v (present %v), want 0", group, got, ok)
		}
		return nil
	})

	// The raylets' shipped alert rules name only metrics a raylet exports (an H100
	// exports both the GPM series and the utilization-rate fallback).
	families, err := harness.Scrape(t, address)
	if err != nil {
		t.Fatal(err)
	}
	if alerts := checkAlertRules(t, "raygo-raylets", families); alerts != 1 {
		t.Fatalf("%d alert rules on the raylets' metrics, want the 1 shipped", alerts)
	}
}
