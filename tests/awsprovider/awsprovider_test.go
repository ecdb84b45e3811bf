// Package awsprovider_test runs the aws provider end to end on loopback: a moto_server
// is EC2, a fault-injecting proxy in front of it is what raygo's SDK talks to, and an
// instance runner boots every instance moto runs by executing its user data, so the
// nodes really join the cluster (each raylet on a 127.0.0.N address of its own).
package awsprovider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/raygo-dev/raygo/autoscaler/provider/aws"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/ec2proxy"
	"github.com/raygo-dev/raygo/internal/testutil/ec2runner"
	"github.com/raygo-dev/raygo/internal/testutil/motoserver"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// cloud is moto, the proxy, the runner and the environment raygo's processes get.
type cloud struct {
	moto    *ec2.Client
	proxy   *ec2proxy.Proxy
	runner  *ec2runner.Runner
	subnets []string // moto's default subnets, one per zone, by zone
	zones   map[string]string
	env     []string
	temp    string // the nodes' RAYGO_TEMP_DIR
	marks   string // where the user data's setup commands leave a file
}

func newCloud(t *testing.T, cluster string) *cloud {
	t.Helper()
	c, endpoint := newMotoCloud(t)
	c.runner = ec2runner.Start(t, ec2runner.Config{
		Endpoint: endpoint, Region: motoserver.Region, ClusterName: cluster, MetadataURLEnv: aws.MetadataURLEnv,
		PathDir: filepath.Dir(harness.Binary(t)), Env: []string{"RAYGO_TEMP_DIR=" + c.temp, "MARKS=" + c.marks}, LogDir: t.TempDir(),
	})
	return c
}

// newMotoCloud is newCloud without the runner: instances moto runs never boot. It
// returns moto's endpoint too.
func newMotoCloud(t *testing.T) (*cloud, string) {
	t.Helper()
	endpoint := motoserver.Start(t)
	c := &cloud{proxy: ec2proxy.Start(t, endpoint), temp: t.TempDir(), marks: t.TempDir(), zones: map[string]string{}}
	c.moto = ec2.New(ec2.Options{Region: motoserver.Region, BaseEndpoint: awssdk.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	out, err := c.moto.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Subnets {
		c.zones[*s.SubnetId] = *s.AvailabilityZone
	}
	for _, zone := range []string{"us-west-2a", "us-west-2b"} {
		for id, z := range c.zones {
			if z == zone {
				c.subnets = append(c.subnets, id)
			}
		}
	}
	if len(c.subnets) != 2 {
		t.Fatalf("moto's subnets %v: want one in us-west-2a and one in us-west-2b", c.zones)
	}
	none := filepath.Join(t.TempDir(), "none")
	c.env = []string{"AWS_ENDPOINT_URL=" + c.proxy.URL, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none}
	return c, endpoint
}

// yaml is a cluster of a 1-CPU head, up to three 4-CPU workers (min_workers cpuMin) and
// p5.48xlarge workers (simulated DGX H100) on spot in two subnets, with an on-demand
// twin in the first subnet at a higher price.
func (c *cloud) yaml(name string, cpuMin int) string {
	return fmt.Sprintf(`cluster_name: %[1]s
max_workers: 6
provider:
  type: aws
  region: us-west-2
  raygo:
    node_types:
      cpu4: {price_per_hour: 0.2}
      h100_spot: {price_per_hour: 40.0}
      h100_ondemand: {price_per_hour: 98.0}
initialization_commands:
  - touch "$MARKS/init-$(cat /proc/sys/kernel/random/uuid)"
setup_commands:
  - touch "$MARKS/setup-$(cat /proc/sys/kernel/random/uuid)"
head_node_type: head
available_node_types:
  head:
    node_config: {InstanceType: m5.xlarge, ImageId: ami-0123456789abcdef0}
    resources: {CPU: 1}
  cpu4:
    node_config: {InstanceType: c5.xlarge, ImageId: ami-0123456789abcdef0, SubnetIds: [%[2]s, %[3]s]}
    resources: {CPU: 4}
    min_workers: %[4]d
    max_workers: 3
  h100_spot:
    node_config:
      InstanceType: p5.48xlarge
      ImageId: ami-0123456789abcdef0
      SubnetIds: [%[2]s, %[3]s]
      InstanceMarketOptions: {MarketType: spot}
    resources: {CPU: 16}
    max_workers: 3
  h100_ondemand:
    node_config: {InstanceType: p5.48xlarge, ImageId: ami-0123456789abcdef0, SubnetIds: [%[2]s]}
    resources: {CPU: 16}
    max_workers: 2
`, name, c.subnets[0], c.subnets[1], cpuMin)
}

// live returns moto's pending and running instances of the cluster.
func (c *cloud) live(t *testing.T, cluster string) []types.Instance {
	t.Helper()
	out, err := c.moto.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: awssdk.String("tag:" + aws.TagClusterName), Values: []string{cluster}},
		{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var all []types.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

func tagOf(inst types.Instance, key string) string {
	for _, t := range inst.Tags {
		if *t.Key == key {
			return *t.Value
		}
	}
	return ""
}

// gcsView is what the test reads from the head's GCS.
type gcsView struct {
	nodes pb.NodeInfoServiceClient
	pgs   pb.PlacementGroupServiceClient
}

func dialGCS(t *testing.T, address string) gcsView {
	t.Helper()
	conn, err := rpcutil.Dial(address, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gcsView{nodes: pb.NewNodeInfoServiceClient(conn), pgs: pb.NewPlacementGroupServiceClient(conn)}
}

// launched returns the alive nodes with an instance id, by it.
func (g gcsView) launched(t *testing.T) map[string]*pb.NodeInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := g.nodes.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{AliveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pb.NodeInfo{}
	for _, n := range reply.Nodes {
		if id := n.Labels[nodelabel.InstanceID]; id != "" {
			out[id] = n
		}
	}
	return out
}

// strictPack8 creates a detached STRICT_PACK group of 8 one-GPU bundles.
func (g gcsView) strictPack8(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.CreatePlacementGroupRequest{Strategy: "STRICT_PACK", Lifetime: "detached"}
	for range 8 {
		req.Bundles = append(req.Bundles, &pb.CreatePlacementGroupRequest_BundleSpec{Resources: map[string]float64{"GPU": 1}})
	}
	reply, err := g.pgs.CreatePlacementGroup(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return reply.PlacementGroup.PlacementGroupId
}

// waitCreated waits until the group is CREATED and returns the node its bundles are on.
func (g gcsView) waitCreated(t *testing.T, id string) string {
	t.Helper()
	var node string
	harness.Eventually(t, 90*time.Second, "group "+id+" CREATED", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		reply, err := g.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: id})
		if err != nil {
			return err
		}
		if reply.PlacementGroup.State != pb.PlacementGroupState_CREATED {
			return fmt.Errorf("state %s", reply.PlacementGroup.State)
		}
		node = reply.PlacementGroup.Bundles[0].NodeId
		return nil
	})
	return node
}

// instanceOf returns the instance id of the GCS node id.
func (g gcsView) instanceOf(t *testing.T, nodeID string) string {
	t.Helper()
	for id, n := range g.launched(t) {
		if n.NodeId == nodeID {
			return id
		}
	}
	t.Fatalf("node %s is not a launched instance", nodeID)
	return ""
}

func (c *cloud) instance(t *testing.T, cluster, id string) types.Instance {
	t.Helper()
	for _, inst := range c.live(t, cluster) {
		if *inst.InstanceId == id {
			return inst
		}
	}
	t.Fatalf("instance %s is not running in moto", id)
	return types.Instance{}
}

// TestUpSpotCapacityFallbackAndDown: `raygo up` launches min_workers as tagged EC2
// instances whose user data joins them; an 8-GPU STRICT_PACK launches a p5.48xlarge
// spot instance (a simulated DGX H100); a capacity error in the first zone moves the
// next launch to the second; with no spot capacity anywhere the on-demand twin is
// launched; `raygo down` leaves no instance.
func TestUpSpotCapacityFallbackAndDown(t *testing.T) {
	const name = "awsup"
	c := newCloud(t, name)
	bin := harness.Binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(c.yaml(name, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(harness.FreePort(t))
	env := append([]string{"RAYGO_TEMP_DIR=" + c.temp}, c.env...)
	t.Cleanup(func() { harness.Run(t, bin, []string{"stop", "--temp-dir", c.temp, "--grace", "5s"}, env...) })
	out, errOut, code := harness.Run(t, bin, []string{"up", path, "--yes", "--port", port, "--node-ip-address", "127.0.0.1", "--temp-dir", c.temp}, env...)
	if code != 0 {
		t.Fatalf("up: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "cpu4 1/1") {
		t.Fatalf("up did not report min_workers up:\n%s", out)
	}
	gcs := dialGCS(t, "127.0.0.1:"+port)

	// min_workers: one tagged c5.xlarge whose node registered with its instance id,
	// from its own loopback address, after the YAML's commands ran.
	insts := c.live(t, name)
	if len(insts) != 1 || insts[0].InstanceType != "c5.xlarge" || tagOf(insts[0], aws.TagUserNodeType) != "cpu4" || tagOf(insts[0], aws.TagNodeKind) != "worker" {
		t.Fatalf("instances after up: %+v, want one tagged cpu4 c5.xlarge", insts)
	}
	cpuID := *insts[0].InstanceId
	node, ok := gcs.launched(t)[cpuID]
	if !ok || node.Labels[nodelabel.NodeType] != "cpu4" || node.NodeIp != c.runner.IP(cpuID) {
		t.Fatalf("node of %s: %+v, want type cpu4 at %s", cpuID, node, c.runner.IP(cpuID))
	}
	for _, step := range []string{"init-", "setup-"} {
		matches, _ := filepath.Glob(filepath.Join(c.marks, step+"*"))
		if len(matches) != 1 {
			t.Errorf("%s commands ran %d times, want once", step, len(matches))
		}
	}

	// An 8-GPU STRICT_PACK: a p5.48xlarge on spot in the first subnet.
	first := gcs.instanceOf(t, gcs.waitCreated(t, gcs.strictPack8(t)))
	inst := c.instance(t, name, first)
	if inst.InstanceType != "p5.48xlarge" || inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot || tagOf(inst, aws.TagUserNodeType) != "h100_spot" || *inst.SubnetId != c.subnets[0] {
		t.Fatalf("instance for the gang: %s %s %s in %s, want p5.48xlarge spot h100_spot in %s", inst.InstanceType, inst.InstanceLifecycle, tagOf(inst, aws.TagUserNodeType), *inst.SubnetId, c.subnets[0])
	}
	if gpus := gcs.launched(t)[first].ResourcesTotal["GPU"]; gpus != 8 {
		t.Fatalf("node of %s has %v GPUs, want 8 (a simulated DGX H100)", first, gpus)
	}

	// No spot p5 capacity in the first zone: the next launch goes to the second.
	c.proxy.Inject(ec2proxy.Fault{SubnetID: c.subnets[0], InstanceType: "p5.48xlarge", Market: "spot", Code: "InsufficientInstanceCapacity", Message: "no p5.48xlarge in us-west-2a"})
	second := gcs.instanceOf(t, gcs.waitCreated(t, gcs.strictPack8(t)))
	if inst := c.instance(t, name, second); *inst.SubnetId != c.subnets[1] || inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot {
		t.Fatalf("second gang's instance in %s (%s), want spot in %s", *inst.SubnetId, inst.InstanceLifecycle, c.subnets[1])
	}

	// No spot capacity in any zone (h100_spot could take a third node): the type is
	// backed off and its on-demand twin launched.
	c.proxy.Inject(ec2proxy.Fault{InstanceType: "p5.48xlarge", Market: "spot", Code: "InsufficientInstanceCapacity", Message: "no spot p5.48xlarge"})
	third := gcs.instanceOf(t, gcs.waitCreated(t, gcs.strictPack8(t)))
	if inst := c.instance(t, name, third); tagOf(inst, aws.TagUserNodeType) != "h100_ondemand" || inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		t.Fatalf("third gang's instance: %s %s, want h100_ondemand on demand", tagOf(inst, aws.TagUserNodeType), inst.InstanceLifecycle)
	}
	out, _, _ = harness.Run(t, bin, []string{"status", "--address", "127.0.0.1:" + port}, env...)
	if !strings.Contains(out, "no capacity") || !strings.Contains(out, "h100_spot") || !strings.Contains(out, "InsufficientInstanceCapacity") {
		t.Errorf("status does not show the capacity failure of h100_spot:\n%s", out)
	}

	out, errOut, code = harness.Run(t, bin, []string{"down", path, "--yes", "--port", port, "--temp-dir", c.temp}, env...)
	if code != 0 {
		t.Fatalf("down: exit %d\n%s\n%s", code, out, errOut)
	}
	if left := c.live(t, name); len(left) != 0 {
		t.Fatalf("%d instances pending or running after down", len(left))
	}
	harness.Eventually(t, 20*time.Second, "the runner stopped every node", func() error {
		if n := c.runner.Running(); n != 0 {
			return fmt.Errorf("%d still running", n)
		}
		return nil
	})
}

// TestLaunchErrorsAreOneStatusLineAndLeakNothing: each EC2 error of a launch is one line
// of `raygo status` naming the node type and the code, and no instance is left.
func TestLaunchErrorsAreOneStatusLineAndLeakNothing(t *testing.T) {
	const name = "awserr"
	c := newCloud(t, name)
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(c.yaml(name, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	head := harness.StartHeadWithEnv(t, c.env, "--num-cpus", "1", "--autoscaling-config", path)
	gcs := dialGCS(t, head.GCSAddress)
	gcs.strictPack8(t)
	for _, code := range []string{"AuthFailure", "UnauthorizedOperation", "InvalidParameterValue", "RequestLimitExceeded"} {
		c.proxy.Clear()
		c.proxy.Inject(ec2proxy.Fault{Code: code, Message: "injected " + code})
		harness.Eventually(t, 90*time.Second, "status shows "+code, func() error {
			out, _, _ := head.Run("status")
			_, failures, _ := strings.Cut(out, "Recent failures:")
			for _, line := range strings.Split(failures, "\n") {
				if strings.Contains(line, code+": injected "+code) && strings.Contains(line, "launch 1 h100_") && strings.Contains(line, "(p5.48xlarge)") {
					t.Logf("status: %s", strings.TrimSpace(line))
					return nil
				}
			}
			return fmt.Errorf("no failure line naming the type and %s:\n%s", code, out)
		})
		if left := c.live(t, name); len(left) != 0 {
			t.Fatalf("%s: %d instances left", code, len(left))
		}
	}
}

// TestAGangWhoseLastLaunchFailsLeavesNoInstance: a 4-node STRICT_SPREAD gang needs three
// cpu4 nodes and one h100_ondemand node; the h100 launch, the 4th, fails (no capacity),
// so the three cpu4 instances launched for the gang in the same tick are terminated at
// once: nothing of the gang stays running (Karpenter pays for 3 of 4 nodes,
// karpenter#3138).
func TestAGangWhoseLastLaunchFailsLeavesNoInstance(t *testing.T) {
	const name = "awsgang"
	c := newCloud(t, name)
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(c.yaml(name, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	head := harness.StartHeadWithEnv(t, c.env, "--num-cpus", "1", "--autoscaling-config", path)
	gcs := dialGCS(t, head.GCSAddress)
	c.proxy.Inject(ec2proxy.Fault{InstanceType: "p5.48xlarge", Market: "on-demand", Code: "InsufficientInstanceCapacity", Message: "no on-demand p5.48xlarge"})
	onType := func(nodeType string) map[string]string { return map[string]string{nodelabel.NodeType: nodeType} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := gcs.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "STRICT_SPREAD", Lifetime: "detached",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{
			{Resources: map[string]float64{"CPU": 4}, LabelSelector: onType("cpu4")},
			{Resources: map[string]float64{"CPU": 4}, LabelSelector: onType("cpu4")},
			{Resources: map[string]float64{"CPU": 4}, LabelSelector: onType("cpu4")},
			{Resources: map[string]float64{"CPU": 16}, LabelSelector: onType("h100_ondemand")}}})
	if err != nil {
		t.Fatal(err)
	}
	// The gang's cpu4 instances were launched, then terminated with the failed launch.
	harness.Eventually(t, 60*time.Second, "the gang's cpu4 instances launched and terminated", func() error {
		out, err := c.moto.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []types.Filter{
			{Name: awssdk.String("tag:" + aws.TagClusterName), Values: []string{name}},
			{Name: awssdk.String("instance-type"), Values: []string{"c5.xlarge"}}}})
		if err != nil {
			return err
		}
		terminated, live := 0, 0
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				switch inst.State.Name {
				case types.InstanceStateNameTerminated, types.InstanceStateNameShuttingDown:
					terminated++
				default:
					live++
				}
			}
		}
		if terminated < 3 || live != 0 {
			return fmt.Errorf("cpu4 instances: %d terminated, %d live", terminated, live)
		}
		return nil
	})
	if left := c.live(t, name); len(left) != 0 {
		t.Fatalf("%d instances of the gang left running", len(left))
	}
	got, err := gcs.pgs.GetPlacementGroup(ctx, &pb.GetPlacementGroupRequest{PlacementGroupId: reply.PlacementGroup.PlacementGroupId})
	if err != nil || got.PlacementGroup.State != pb.PlacementGroupState_PENDING {
		t.Fatalf("the gang: %v, %v; want PENDING", got, err)
	}
}

// TestASpotInterruptionMovesTheGangToAReplacementInstanceBeforeTheDeadline: an 8-GPU
// STRICT_PACK whose owner has a preemption hook runs on a p5.48xlarge spot instance
// launched through moto; its raylet (started by the user data) watches the instance
// metadata. EC2 (the runner) posts an interruption notice with a deadline 60 s ahead:
// the raylet drains itself (PREEMPTION), the owner's hook runs while the bundles are
// still on the spot node, then they move to a replacement spot instance the autoscaler
// launches through moto, before the deadline; at the deadline EC2 terminates the
// interrupted instance and the replacement is all that runs.
func TestASpotInterruptionMovesTheGangToAReplacementInstanceBeforeTheDeadline(t *testing.T) {
	const name = "awsspot"
	c := newCloud(t, name)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(c.yaml(name, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	head := harness.StartHeadWithEnv(t, c.env, "--num-cpus", "1", "--autoscaling-config", path)
	gcs := dialGCS(t, head.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client, err := sdk.Connect(ctx, sdk.Options{Address: head.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	bundles := make([]sdk.Bundle, 8)
	for i := range bundles {
		bundles[i] = sdk.Bundle{"GPU": 1}
	}
	pg, err := client.CreatePlacementGroup(ctx, bundles, sdk.StrictPack)
	if err != nil {
		t.Fatal(err)
	}
	type hooked struct {
		notice sdk.PreemptionNotice
		row    *sdk.PlacementGroupInfo
	}
	calls := make(chan hooked, 4)
	stop := pg.OnPreemption(func(ctx context.Context, notice sdk.PreemptionNotice) error {
		row, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		calls <- hooked{notice, row}
		return nil
	})
	defer stop()
	spotNode := gcs.waitCreated(t, pg.ID)
	spot := gcs.instanceOf(t, spotNode)
	if inst := c.instance(t, name, spot); inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot || tagOf(inst, aws.TagUserNodeType) != "h100_spot" {
		t.Fatalf("the gang's instance is %s %s, want an h100_spot spot instance", tagOf(inst, aws.TagUserNodeType), inst.InstanceLifecycle)
	}

	deadline := time.Now().Add(60 * time.Second).Truncate(time.Second)
	c.runner.Interrupt(t, spot, deadline)
	var call hooked
	select {
	case call = <-calls:
	case <-ctx.Done():
		t.Fatal("the owner's preemption hook never ran")
	}
	if call.notice.Reason != "SpotInterruption" || call.notice.Deadline.After(deadline.Add(-30*time.Second)) {
		t.Fatalf("notice %+v, want SpotInterruption ending 30 s before the node's deadline %s", call.notice, deadline)
	}
	if call.row.State != "CREATED" || call.row.Bundles[0].NodeID != spotNode {
		t.Fatalf("during the hook the group is %s on %s, want CREATED, still on the spot node %s", call.row.State, call.row.Bundles[0].NodeID, spotNode)
	}

	var moved string
	harness.Eventually(t, 90*time.Second, "the gang on a replacement node", func() error {
		row, err := pg.Table(ctx)
		if err != nil {
			return err
		}
		if row.State != "CREATED" || row.Bundles[0].NodeID == spotNode {
			return fmt.Errorf("state %s on %s", row.State, row.Bundles[0].NodeID)
		}
		moved = row.Bundles[0].NodeID
		return nil
	})
	if time.Now().After(deadline) {
		t.Fatalf("the gang moved after the deadline %s", deadline)
	}
	replacement := gcs.instanceOf(t, moved)
	if inst := c.instance(t, name, replacement); replacement == spot || inst.InstanceType != "p5.48xlarge" || tagOf(inst, aws.TagUserNodeType) != "h100_spot" {
		t.Fatalf("the replacement %s is %s %s, want a new h100_spot p5.48xlarge", replacement, tagOf(inst, aws.TagUserNodeType), inst.InstanceType)
	}
	if len(calls) != 0 {
		t.Fatalf("the hook ran %d more times", len(calls))
	}

	// At the deadline EC2 takes the instance; the replacement alone runs, the gang on it.
	harness.Eventually(t, 90*time.Second, "the interrupted instance terminated", func() error {
		live := c.live(t, name)
		if len(live) != 1 || *live[0].InstanceId != replacement {
			ids := []string{}
			for _, inst := range live {
				ids = append(ids, *inst.InstanceId)
			}
			return fmt.Errorf("live instances %v, want only %s", ids, replacement)
		}
		return nil
	})
	if row, err := pg.Table(ctx); err != nil || row.State != "CREATED" || row.Bundles[0].NodeID != moved {
		t.Fatalf("after the interrupted instance went, the gang is %+v (%v), want CREATED on %s", row, err, moved)
	}
}
