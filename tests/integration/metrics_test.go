package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// On two simulated DGX H100 nodes with 4 GPUs held on each (one STRICT_SPREAD group),
// an 8-GPU STRICT_PACK gang
// waits as Fragmented (8 GPUs free, no island of 8), and the head's /metrics says so:
// 8 free GPUs no 8-GPU gang can use, nodes, GPUs, groups by state, pending by reason,
// decision latency and commit outcomes; raygo status and the state API (the dashboard's
// source) give the gang the same reason code.
func TestHeadMetricsShowFragmentationAndWhyWorkWaits(t *testing.T) {
	t.Parallel()
	queues := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(queues, []byte("queues:\n  - name: everyone\n    namespaces: [\"*\"]\n    resources:\n      GPU: {nominalQuota: 64}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.StartHead(t, "--num-cpus", "4", "--dashboard-port", "0", "--queues", queues)
	c.AddNode("--gpu-sim", "dgx-h100")
	c.AddNode("--gpu-sim", "dgx-h100")
	dashboard := c.DashboardAddress(t, "")
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := func(strategy string, bundles ...float64) string {
		req := &pb.CreatePlacementGroupRequest{Strategy: strategy, Lifetime: "detached"}
		for _, gpus := range bundles {
			req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"GPU": gpus}})
		}
		reply, err := pgs.CreatePlacementGroup(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return reply.PlacementGroup.PlacementGroupId
	}
	create("STRICT_SPREAD", 4, 4) // 4 GPUs on each node
	gang := create("STRICT_PACK", 1, 1, 1, 1, 1, 1, 1, 1)
	harness.Eventually(t, 30*time.Second, "the gang waits as Fragmented", func() error {
		reply, err := pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: gang})
		if err != nil {
			return err
		}
		if g := reply.PlacementGroup; g.State != pb.PlacementGroupState_PENDING || g.PendingReasonCode != "Fragmented" {
			return fmt.Errorf("%v %q", g.State, g.PendingReasonCode)
		}
		return nil
	})
	want := []struct {
		name, label, value string
		want               float64
	}{
		{"raygo_nodes", "state", "ALIVE", 3},
		{"raygo_gpus", "state", "total", 16},
		{"raygo_gpus", "state", "allocated", 8},
		{"raygo_placement_groups", "state", "CREATED", 1},
		{"raygo_placement_groups", "state", "PENDING", 1},
		{"raygo_pending_workloads", "reason", "Fragmented", 1},
		{"raygo_gpus_free_unschedulable", "shape", "8", 8},
		{"raygo_gpus_free_unschedulable", "shape", "4", 0},
		{"raygo_gpus_free_unschedulable", "shape", "1", 0},
		{"raygo_placement_group_commits_total", "outcome", "created", 1},
		{"raygo_queue_usage", "queue", "everyone", 8},
	}
	harness.Eventually(t, 30*time.Second, "/metrics as the cluster is", func() error {
		families, err := harness.Scrape(t, dashboard)
		if err != nil {
			return err
		}
		for _, w := range want {
			got, ok := harness.MetricValue(families, w.name, w.label, w.value)
			if !ok || got != w.want {
				return fmt.Errorf("%s{%s=%q} = %v (present %v), want %v", w.name, w.label, w.value, got, ok, w.want)
			}
		}
		if n, ok := harness.MetricValue(families, "raygo_scheduling_decision_seconds", "", ""); !ok || n == 0 {
			return fmt.Errorf("raygo_scheduling_decision_seconds counted %v decisions", n)
		}
		if _, ok := harness.MetricValue(families, "raygo_gpu_fragmentation_expected", "", ""); !ok {
			return fmt.Errorf("no raygo_gpu_fragmentation_expected")
		}
		if n, ok := harness.MetricValue(families, "raygo_pending_workload_age_seconds", "", ""); !ok || n != 1 {
			return fmt.Errorf("raygo_pending_workload_age_seconds counts %v waiting groups, want 1", n)
		}
		return nil
	})
	// raygo status shows the same fragmentation, read from this /metrics, and the queues.
	status, _, code := c.Run("status")
	// The same reason code for the same waiting gang in the three views: /metrics counts it
	// above; raygo status names it on the gang's line, and the state API (the dashboard's
	// Pending page reads it) in its row.
	gangLine := ""
	for _, line := range strings.Split(status, "\n") {
		if strings.Contains(line, "pg_"+gang[:12]) {
			gangLine = line
		}
	}
	if !strings.Contains(gangLine, "[Fragmented]") {
		t.Errorf("raygo status's line of the gang %q lacks [Fragmented]:\n%s", gangLine, status)
	}
	rows, err := http.Get("http://" + dashboard + "/api/v0/placement_groups?detail=all&filter_keys=placement_group_id&filter_predicates=%3D&filter_values=" + gang)
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Data struct {
			Result struct {
				Result []struct {
					PendingReasonCode string `json:"pending_reason_code"`
				} `json:"result"`
			} `json:"result"`
		} `json:"data"`
	}
	err = json.NewDecoder(rows.Body).Decode(&listed)
	rows.Body.Close()
	if got := listed.Data.Result.Result; err != nil || len(got) != 1 || got[0].PendingReasonCode != "Fragmented" {
		t.Errorf("the state API's row of the gang: %+v (%v), want pending_reason_code Fragmented", got, err)
	}
	if code != 0 || !strings.Contains(status, " 8 GPU(s) of 8-GPU islands\n") || !strings.Contains(status, "Queues\n") ||
		!strings.Contains(status, "everyone") || !strings.Contains(status, " H100: 16.0 total, 8.0 allocated, 8.0 free\n") {
		t.Errorf("raygo status lacks the fragmentation, queues or GPUs by model:\n%s", status)
	}

	// The head's shipped alert rules parse and name only metrics the head exports.
	families, err := harness.Scrape(t, dashboard)
	if err != nil {
		t.Fatal(err)
	}
	if alerts := checkAlertRules(t, "raygo", families); alerts != 3 {
		t.Fatalf("%d alert rules on the head's metrics, want the 3 shipped", alerts)
	}
}

// checkAlertRules checks that the rules of the named group in the shipped alert file
// name only metrics (raygo's and DCGM's) present in families, and returns how many rules
// the group has.
func checkAlertRules(t *testing.T, groupName string, families map[string]*dto.MetricFamily) int {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/prometheus/raygo-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, group := range rules.Groups {
		if group.Name != groupName {
			continue
		}
		for _, rule := range group.Rules {
			alerts++
			if strings.Count(rule.Expr, "(") != strings.Count(rule.Expr, ")") {
				t.Errorf("alert %s: unbalanced parentheses in %s", rule.Alert, rule.Expr)
			}
			for _, name := range regexp.MustCompile(`(raygo|DCGM)_[A-Za-z_]+`).FindAllString(rule.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(name, "_count"), "_bucket")
				if families[base] == nil && families[name] == nil {
					t.Errorf("alert %s uses %s, which is not exported there", rule.Alert, name)
				}
			}
		}
	}
	return alerts
}

// A raylet started with --metrics-export-port serves its own /metrics: its resources,
// the bundles it holds, and each GPU's allocation with DCGM's labels.
func TestRayletMetricsShowItsBundlesAndGPUs(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	port := harness.FreePort(t)
	c.AddNode("--gpu-sim", "dgx-h100", "--metrics-export-port", strconv.Itoa(port))
	pgs := harness.DialPlacementGroups(t, c.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &pb.CreatePlacementGroupRequest{Strategy: "STRICT_PACK", Lifetime: "detached",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"GPU": 1}}, {Resources: map[string]float64{"GPU": 1}}}}
	if _, err := pgs.CreatePlacementGroup(ctx, req); err != nil {
		t.Fatal(err)
	}
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	harness.Eventually(t, 30*time.Second, "the raylet's /metrics with the group", func() error {
		families, err := harness.Scrape(t, address)
		if err != nil {
			return err
		}
		if got, _ := harness.MetricValue(families, "raygo_raylet_bundles", "state", "committed"); got != 2 {
			return fmt.Errorf("committed bundles %v, want 2", got)
		}
		if got, _ := harness.MetricValue(families, "raygo_raylet_resources_total", "resource", "GPU"); got != 8 {
			return fmt.Errorf("GPU total %v, want 8", got)
		}
		allocated, gpus := 0.0, 0
		for _, m := range families["raygo_raylet_gpu_allocated"].GetMetric() {
			gpus++
			allocated += m.GetGauge().GetValue()
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["UUID"] == "" || labels["modelName"] == "" || labels["gpu"] == "" {
				return fmt.Errorf("GPU labels %v", labels)
			}
		}
		if gpus != 8 || allocated != 2 {
			return fmt.Errorf("%d GPUs with %v allocated, want 8 with 2", gpus, allocated)
		}
		return nil
	})
}
