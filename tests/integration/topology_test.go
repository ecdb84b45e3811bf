package integration

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// Two simulated DGX H100 raylets and one PCIe node whose GPUs are NVLink-bridged in pairs:
// a 2-GPU STRICT_PACK on the PCIe node lands on one NVLink pair; an 8-GPU STRICT_PACK
// takes a whole DGX; a SPREAD of GPU bundles over the DGXs is rail-aligned.
func TestTopologyAwarePlacementOnSimulatedNodes(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "2")
	dgxA := c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "64", "--labels", "topology.raygo.io/su=su-1")
	dgxB := c.AddNode("--gpu-sim", "dgx-h100", "--num-cpus", "64", "--labels", "topology.raygo.io/su=su-1")
	pcie := c.AddNode("--gpu-sim", "pcie-8gpu-nvlink-pairs", "--num-cpus", "64")

	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	islandOf := map[string]map[int]int32{}
	for _, n := range nodes {
		islandOf[n.NodeId] = map[int]int32{}
		for _, g := range n.Gpus {
			islandOf[n.NodeId][int(g.Index)] = g.NvlinkIsland
		}
	}
	pcieNode := harness.FindNode(nodes, pcie.NodeID)
	if len(pcieNode.Gpus) != 8 || pcieNode.Labels["ray.io/accelerator-type"] != "H100" || pcieNode.ResourcesTotal["GPU"] != 8 {
		t.Fatalf("PCIe node: %d GPUs, labels %v, resources %v", len(pcieNode.Gpus), pcieNode.Labels, pcieNode.ResourcesTotal)
	}
	if islands := distinctIslands(pcieNode.Gpus); islands != 4 {
		t.Fatalf("PCIe node reports %d NVLink islands, want 4 pairs", islands)
	}

	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	onPCIe := []map[string]string{{"ray.io/node-id": pcie.NodeID}, {"ray.io/node-id": pcie.NodeID}}
	pair, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}, {"GPU": 1}}, sdk.StrictPack, sdk.WithBundleLabelSelector(onPCIe))
	if err != nil {
		t.Fatal(err)
	}
	info := ready(t, pair)
	var gpus []int
	for _, b := range info.Bundles {
		if b.NodeID != pcie.NodeID || len(b.GPUIDs) != 1 || len(b.DeviceUUIDs) != 1 || !strings.HasPrefix(b.DeviceUUIDs[0], "GPU-") {
			t.Fatalf("bundle %d: node %s GPUs %v UUIDs %v", b.Index, b.NodeID, b.GPUIDs, b.DeviceUUIDs)
		}
		gpus = append(gpus, b.GPUIDs[0])
	}
	if islandOf[pcie.NodeID][gpus[0]] != islandOf[pcie.NodeID][gpus[1]] || islandOf[pcie.NodeID][gpus[0]] < 0 {
		t.Fatalf("2-GPU STRICT_PACK got GPUs %v on islands %d and %d; want one NVLink pair", gpus,
			islandOf[pcie.NodeID][gpus[0]], islandOf[pcie.NodeID][gpus[1]])
	}

	// A 4-GPU STRICT_PACK cannot fit one PCIe island: it must go to a DGX.
	tp, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 4, "CPU": 8}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	tpInfo := ready(t, tp)
	if n := tpInfo.Bundles[0].NodeID; n != dgxA.NodeID && n != dgxB.NodeID {
		t.Fatalf("4-GPU STRICT_PACK on %s, want a DGX H100 (one NVSwitch island)", n)
	}
	if got := tpInfo.Bundles[0].CUDAVisibleDevices; strings.Count(got, ",") != 3 {
		t.Fatalf("4-GPU bundle CUDA_VISIBLE_DEVICES = %q", got)
	}
	if err := tp.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	// Four GPUs on the PCIe node span two NVLink pairs: infeasible as an island, fine with
	// topology="node" (Ray's one-node meaning).
	four := []map[string]string{{"ray.io/node-id": pcie.NodeID}}
	island, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 4}}, sdk.StrictPack, sdk.WithBundleLabelSelector(four))
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "4-GPU island on the PCIe node is INFEASIBLE", func() error {
		row, err := island.Table(ctx)
		if err != nil {
			return err
		}
		if row.SchedulingState != "INFEASIBLE" || !strings.Contains(row.PendingReason, "NVLink island") {
			return fmt.Errorf("%s: %s", row.SchedulingState, row.PendingReason)
		}
		return nil
	})
	if err := island.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	plain, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 4}}, sdk.StrictPack, sdk.WithBundleLabelSelector(four), sdk.NodeTopology())
	if err != nil {
		t.Fatal(err)
	}
	if got := ready(t, plain).Bundles[0].NodeID; got != pcie.NodeID {
		t.Fatalf("topology=node group on %s", got)
	}
	if err := plain.Remove(ctx); err != nil {
		t.Fatal(err)
	}

	// Data parallel: one GPU on each DGX, the same rail on both.
	onDGX := []map[string]string{{"ray.io/node-id": fmt.Sprintf("in(%s,%s)", dgxA.NodeID, dgxB.NodeID)}, {"ray.io/node-id": fmt.Sprintf("in(%s,%s)", dgxA.NodeID, dgxB.NodeID)}}
	dp, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}, {"GPU": 1}}, sdk.StrictSpread, sdk.WithBundleLabelSelector(onDGX))
	if err != nil {
		t.Fatal(err)
	}
	dpInfo := ready(t, dp)
	if dpInfo.Bundles[0].NodeID == dpInfo.Bundles[1].NodeID || dpInfo.Bundles[0].GPUIDs[0] != dpInfo.Bundles[1].GPUIDs[0] {
		t.Fatalf("SPREAD over the DGXs: %+v; want distinct nodes and the same GPU (rail) index", dpInfo.Bundles)
	}

	// The CLI shows the assignment and the GPUs.
	stdout, _, code := c.Run("list", "placement-groups", "--format", "json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &rows) != nil {
		t.Fatalf("list placement-groups: %d\n%s", code, stdout)
	}
	first := rows[0]["bundles"].([]any)[0].(map[string]any)
	if first["cuda_visible_devices"] != fmt.Sprint(gpus[0]) || len(first["device_uuids"].([]any)) != 1 {
		t.Errorf("table bundle 0: %v", first)
	}
	stdout, _, _ = c.Run("list", "nodes", "--format", "json")
	if !strings.Contains(stdout, `"nvlink_island"`) || !strings.Contains(stdout, `"rail"`) {
		t.Errorf("list nodes JSON lacks the GPU topology:\n%.400s", stdout)
	}

	// topology="node" on a SPREAD: Ray's meaning, no rails. One more GPU taken on dgxA
	// leaves the DGXs different lowest free GPUs, though a rail is still free on both;
	// each bundle gets its node's lowest free GPU.
	rail := dpInfo.Bundles[0].GPUIDs[0]
	onA := []map[string]string{{"ray.io/node-id": dgxA.NodeID}}
	extra, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}}, sdk.StrictPack, sdk.WithBundleLabelSelector(onA))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]map[int]bool{dgxA.NodeID: {rail: true, ready(t, extra).Bundles[0].GPUIDs[0]: true}, dgxB.NodeID: {rail: true}}
	plainDP, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 1}, {"GPU": 1}}, sdk.StrictSpread, sdk.WithBundleLabelSelector(onDGX), sdk.NodeTopology())
	if err != nil {
		t.Fatal(err)
	}
	plainInfo := ready(t, plainDP)
	for _, b := range plainInfo.Bundles {
		lowest := 0
		for used[b.NodeID][lowest] {
			lowest++
		}
		if len(b.GPUIDs) != 1 || b.GPUIDs[0] != lowest {
			t.Errorf("topology=node SPREAD bundle %d on %s got GPUs %v, want its lowest free GPU %d", b.Index, b.NodeID, b.GPUIDs, lowest)
		}
	}
	if plainInfo.Bundles[0].NodeID == plainInfo.Bundles[1].NodeID {
		t.Errorf("topology=node STRICT_SPREAD on one node: %+v", plainInfo.Bundles)
	}
}

func distinctIslands(gpus []*pb.GPUInfo) int {
	seen := map[int32]bool{}
	for _, g := range gpus {
		seen[g.NvlinkIsland] = true
	}
	keys := make([]int, 0, len(seen))
	for k := range seen {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	return len(keys)
}

// GB200 NVL72: nodes of one rack form one NVLink domain, so a STRICT_PACK bigger than a
// node spans the nodes of one rack, never two racks.
func TestStrictPackSpansOneMultiNodeNVLinkDomain(t *testing.T) {
	t.Parallel()
	c := harness.StartHead(t, "--num-cpus", "1")
	rackA1 := c.AddNode("--gpu-sim", "gb200-nvl72", "--gpu-sim-rack", "rack-a", "--num-cpus", "16")
	rackB := c.AddNode("--gpu-sim", "gb200-nvl72", "--gpu-sim-rack", "rack-b", "--num-cpus", "16")
	rackA2 := c.AddNode("--gpu-sim", "gb200-nvl72", "--gpu-sim-rack", "rack-a", "--num-cpus", "16")
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	a1, b, a2 := harness.FindNode(nodes, rackA1.NodeID), harness.FindNode(nodes, rackB.NodeID), harness.FindNode(nodes, rackA2.NodeID)
	if a1.NvlinkDomain == "" || a1.NvlinkDomain != a2.NvlinkDomain || a1.NvlinkDomain == b.NvlinkDomain {
		t.Fatalf("NVLink domains: rack-a %q %q, rack-b %q", a1.NvlinkDomain, a2.NvlinkDomain, b.NvlinkDomain)
	}
	if a1.Labels["topology.raygo.io/rack"] != "rack-a" || a1.Labels["ray.io/accelerator-type"] != "GB200" || len(a1.Gpus) != 4 {
		t.Fatalf("GB200 node: labels %v, %d GPUs", a1.Labels, len(a1.Gpus))
	}
	ctx := testContext(t)
	client, err := sdk.Connect(ctx, sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pg, err := client.CreatePlacementGroup(ctx, []sdk.Bundle{{"GPU": 4}, {"GPU": 4}, {"CPU": 2}}, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	info := ready(t, pg)
	onRackA := map[string]bool{rackA1.NodeID: true, rackA2.NodeID: true}
	used := map[string]bool{}
	for _, bundle := range info.Bundles {
		if !onRackA[bundle.NodeID] {
			t.Fatalf("bundle %d on %s, outside rack-a's NVLink domain", bundle.Index, bundle.NodeID)
		}
		if len(bundle.GPUIDs) > 0 {
			used[bundle.NodeID] = true
		}
	}
	if len(used) != 2 {
		t.Fatalf("8 GPUs on %d node(s), want both rack-a nodes", len(used))
	}
}
