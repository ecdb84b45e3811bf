package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/testutil/ec2proxy"
	"github.com/raygo-dev/raygo/internal/testutil/motoserver"
)

// env is a moto_server behind a fault-injecting proxy, the provider's SDK pointed at
// the proxy the usual way (AWS_ENDPOINT_URL, static credentials), a client straight to
// moto to check what the provider did, and moto's default subnets, one per zone.
type env struct {
	moto    *ec2.Client
	proxy   *ec2proxy.Proxy
	subnets []types.Subnet
	clock   *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	endpoint := motoserver.Start(t)
	proxy := ec2proxy.Start(t, endpoint)
	t.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	moto := ec2.New(ec2.Options{Region: motoserver.Region, BaseEndpoint: awssdk.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	out, err := moto.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	subnets := out.Subnets
	slices.SortFunc(subnets, func(a, b types.Subnet) int { return strings.Compare(*a.AvailabilityZone, *b.AvailabilityZone) })
	if len(subnets) < 2 {
		t.Fatalf("moto has %d subnets, want one per zone", len(subnets))
	}
	return &env{moto: moto, proxy: proxy, subnets: subnets, clock: &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

const gcs = "127.0.0.1:6380"

func h100NodeConfig(subnets ...string) map[string]any {
	ids := make([]any, len(subnets))
	for i, s := range subnets {
		ids[i] = s
	}
	return map[string]any{
		"InstanceType": "p5.48xlarge", "ImageId": "ami-0123456789abcdef0", "SubnetIds": ids,
		"KeyName": "ray", "InstanceMarketOptions": map[string]any{"MarketType": "spot"},
		"BlockDeviceMappings": []any{map[string]any{"DeviceName": "/dev/sda1", "Ebs": map[string]any{"VolumeSize": 500}}},
		"TagSpecifications":   []any{map[string]any{"ResourceType": "instance", "Tags": []any{map[string]any{"Key": "team", "Value": "ml"}}}},
	}
}

func (e *env) provider(t *testing.T, nodeConfigs map[string]map[string]any) *Provider {
	t.Helper()
	p, err := New(context.Background(), Config{
		ClusterName: "c1", Region: motoserver.Region, GCSAddress: gcs, NodeConfigs: nodeConfigs,
		Commands: func(string) ([]string, []string) {
			return []string{"echo init-ran > \"$RAYGO_TEST_DIR/init\""}, []string{"echo setup-ran > \"$RAYGO_TEST_DIR/setup\""}
		},
		LaunchTimeout: 30 * time.Second, Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func h100Request(nodeConfig map[string]any, id string) provider.LaunchRequest {
	return provider.LaunchRequest{NodeType: "h100x8", NodeConfig: nodeConfig, Count: 2, RequestID: id,
		Resources: map[string]float64{"CPU": 192, "GPU": 8}, GPUModel: "dgx-h100", Labels: map[string]string{"zone": "a"}}
}

// described returns moto's instances with the filters, of any state.
func (e *env) described(t *testing.T, filters ...types.Filter) []types.Instance {
	t.Helper()
	out, err := e.moto.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: filters})
	if err != nil {
		t.Fatal(err)
	}
	var all []types.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

func (e *env) live(t *testing.T) []types.Instance {
	return e.described(t, types.Filter{Name: awssdk.String("tag:" + TagClusterName), Values: []string{"c1"}},
		types.Filter{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}})
}

func TestLaunchTagsUserDataDescribeTerminate(t *testing.T) {
	e := newEnv(t)
	a := *e.subnets[0].SubnetId
	nc := h100NodeConfig(a, *e.subnets[1].SubnetId)
	p := e.provider(t, map[string]map[string]any{"h100x8": nc})
	ctx := context.Background()
	launched, err := p.Launch(ctx, h100Request(nc, "launch-1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(launched) != 2 || launched[0].NodeType != "h100x8" || launched[0].RequestID != "launch-1" {
		t.Fatalf("launched %+v, want 2 h100x8 of launch-1", launched)
	}
	if e.proxy.Requests("RunInstances") != 1 {
		t.Fatalf("RunInstances calls = %d, want 1 (MinCount = MaxCount = 2)", e.proxy.Requests("RunInstances"))
	}
	insts := e.live(t)
	if len(insts) != 2 {
		t.Fatalf("moto runs %d instances of the cluster, want 2", len(insts))
	}
	for _, inst := range insts {
		want := map[string]string{TagClusterName: "c1", TagNodeKind: "worker", TagUserNodeType: "h100x8",
			TagNodeName: "ray-c1-worker", TagLaunchRequest: "launch-1", "team": "ml"}
		for k, v := range want {
			if got := tag(inst, k); got != v {
				t.Errorf("%s: tag %s = %q, want %q", *inst.InstanceId, k, got, v)
			}
		}
		if *inst.SubnetId != a || inst.InstanceType != "p5.48xlarge" || inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot || awssdk.ToString(inst.KeyName) != "ray" {
			t.Errorf("%s: subnet %s type %s lifecycle %s key %v, want %s p5.48xlarge spot ray", *inst.InstanceId, *inst.SubnetId, inst.InstanceType, inst.InstanceLifecycle, inst.KeyName, a)
		}
	}
	listed, err := p.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].NodeType != "h100x8" || listed[0].RequestID != "launch-1" {
		t.Fatalf("Instances = %+v", listed)
	}

	// The user data: run it with a fake raygo and metadata server.
	attr, err := e.moto.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: insts[0].InstanceId, Attribute: types.InstanceAttributeNameUserData})
	if err != nil {
		t.Fatal(err)
	}
	script, err := base64.StdEncoding.DecodeString(awssdk.ToString(attr.UserData.Value))
	if err != nil {
		t.Fatal(err)
	}
	args := runUserData(t, string(script), *insts[0].InstanceId, "127.0.0.9")
	for _, want := range []string{
		"start --address " + gcs + " --block --node-name " + *insts[0].InstanceId,
		"--num-cpus 192", "--num-gpus 8", "--gpu-sim dgx-h100",
		"--labels " + nodelabel.InstanceID + "=" + *insts[0].InstanceId + "," + nodelabel.NodeType + "=h100x8,zone=a",
		"--node-ip-address 127.0.0.9", "--spot-metadata-url http://127.0.0.1:",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("raygo ran with %q, want %q in it\nscript:\n%s", args, want, script)
		}
	}

	ids := []string{listed[0].ID, listed[1].ID}
	if err := p.Terminate(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitTerminated(ctx, ids, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if left, _ := p.Instances(ctx); len(left) != 0 {
		t.Fatalf("Instances after Terminate = %+v", left)
	}
	if err := p.Terminate(ctx, append(ids, "i-0123456789abcdef0")); err != nil {
		t.Fatalf("terminating instances already gone: %v", err)
	}
}

// runUserData runs script with sh as an instance would, with a metadata server on
// loopback and a raygo that prints its arguments, and returns them; it checks that the
// initialization and setup commands ran first.
func runUserData(t *testing.T, script, instanceID, ip string) string {
	t.Helper()
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			fmt.Fprint(w, "token-1")
		case r.Header.Get("X-aws-ec2-metadata-token") != "token-1":
			http.Error(w, "no token", http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/instance-id":
			fmt.Fprint(w, instanceID)
		case r.URL.Path == "/latest/meta-data/local-ipv4":
			fmt.Fprint(w, ip)
		default:
			http.NotFound(w, r)
		}
	}))
	defer metadata.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raygo"), []byte("#!/bin/sh\necho \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), MetadataURLEnv+"="+metadata.URL, "RAYGO_TEST_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("user data: %v\n%s\nscript:\n%s", err, out, script)
	}
	for _, step := range []string{"init", "setup"} {
		if _, err := os.Stat(filepath.Join(dir, step)); err != nil {
			t.Errorf("the %s commands did not run: %v", step, err)
		}
	}
	return strings.TrimSpace(string(out))
}

func TestCapacityErrorMovesTheLaunchToTheNextSubnetForThreeMinutes(t *testing.T) {
	e := newEnv(t)
	a, b := *e.subnets[0].SubnetId, *e.subnets[1].SubnetId
	nc := h100NodeConfig(a, b)
	p := e.provider(t, map[string]map[string]any{"h100x8": nc})
	ctx := context.Background()
	e.proxy.Inject(ec2proxy.Fault{SubnetID: a, InstanceType: "p5.48xlarge", Market: "spot", Code: "InsufficientInstanceCapacity",
		Message: "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested."})
	subnetOf := func(insts []provider.Instance) string {
		t.Helper()
		found := e.described(t, types.Filter{Name: awssdk.String("instance-id"), Values: []string{insts[0].ID}})
		return *found[0].SubnetId
	}
	first, err := p.Launch(ctx, h100Request(nc, "launch-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := subnetOf(first); got != b || e.proxy.Requests("RunInstances") != 2 {
		t.Fatalf("launched in %s after %d RunInstances, want %s after 2 (the first refused in %s)", got, e.proxy.Requests("RunInstances"), b, a)
	}
	// Within three minutes the zone is not asked again.
	e.proxy.Clear()
	e.clock.advance(UnavailableOfferingTTL - time.Second)
	second, err := p.Launch(ctx, h100Request(nc, "launch-2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := subnetOf(second); got != b || e.proxy.Requests("RunInstances") != 3 {
		t.Fatalf("second launch in %s after %d RunInstances, want %s after 3", got, e.proxy.Requests("RunInstances"), b)
	}
	// After them, it is.
	e.clock.advance(time.Second)
	third, err := p.Launch(ctx, h100Request(nc, "launch-3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := subnetOf(third); got != a {
		t.Fatalf("launch after the cache expired went to %s, want %s", got, a)
	}
	// The on-demand market of the type is another offering: unaffected.
	e.proxy.Inject(ec2proxy.Fault{InstanceType: "p5.48xlarge", Market: "spot", Code: "InsufficientInstanceCapacity", Message: "none"})
	_, err = p.Launch(ctx, h100Request(nc, "launch-4"))
	if !errors.Is(err, provider.ErrCapacity) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "launch 2 h100x8 (p5.48xlarge) (spot): no capacity in any subnet") {
		t.Fatalf("err = %v, want one line wrapping ErrCapacity", err)
	}
	onDemand := h100NodeConfig(a, b)
	delete(onDemand, "InstanceMarketOptions")
	if _, err := p.Launch(ctx, h100Request(onDemand, "launch-5")); err != nil {
		t.Fatalf("on-demand launch while spot has no capacity: %v", err)
	}
	if n := len(e.live(t)); n != 8 {
		t.Fatalf("moto runs %d instances, want 8 (4 launches of 2)", n)
	}
}

func TestErrorsAreOneLineNamingTheTypeAndCodeAndLeakNothing(t *testing.T) {
	e := newEnv(t)
	nc := h100NodeConfig(*e.subnets[0].SubnetId)
	p := e.provider(t, map[string]map[string]any{"h100x8": nc})
	for i, code := range []string{"AuthFailure", "UnauthorizedOperation", "InvalidParameterValue", "RequestLimitExceeded"} {
		e.proxy.Clear()
		e.proxy.Inject(ec2proxy.Fault{Code: code, Message: "injected\nsecond line"})
		_, err := p.Launch(context.Background(), h100Request(nc, fmt.Sprintf("launch-%d", i)))
		if err == nil {
			t.Fatalf("%s: no error", code)
		}
		text := err.Error()
		if strings.Contains(text, "\n") || !strings.HasPrefix(text, "launch 2 h100x8 (p5.48xlarge)") || !strings.Contains(text, ": "+code+": injected") {
			t.Errorf("%s: error %q, want one line naming the type and the code", code, text)
		}
		if errors.Is(err, provider.ErrCapacity) {
			t.Errorf("%s: counted as no capacity", code)
		}
	}
	if n := len(e.live(t)); n != 0 {
		t.Fatalf("%d instances left running", n)
	}
}

func TestATimedOutLaunchTerminatesWhatItCreated(t *testing.T) {
	e := newEnv(t)
	nc := h100NodeConfig(*e.subnets[0].SubnetId)
	p, err := New(context.Background(), Config{ClusterName: "c1", Region: motoserver.Region, GCSAddress: gcs, LaunchTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.proxy.Inject(ec2proxy.Fault{Delay: 10 * time.Second, Times: 1})
	_, err = p.Launch(context.Background(), h100Request(nc, "launch-slow"))
	if err == nil || !strings.Contains(err.Error(), "launch 2 h100x8 (p5.48xlarge)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one line naming the launch", err)
	}
	created := e.described(t, types.Filter{Name: awssdk.String("tag:" + TagLaunchRequest), Values: []string{"launch-slow"}})
	if len(created) != 2 {
		t.Fatalf("moto has %d instances of the request, want the 2 RunInstances created", len(created))
	}
	if n := len(e.live(t)); n != 0 {
		t.Fatalf("%d instances of the timed-out launch left running", n)
	}
}

func TestNodeConfig(t *testing.T) {
	if _, err := New(context.Background(), Config{ClusterName: "c", GCSAddress: gcs, Region: "us-west-2",
		NodeConfigs: map[string]map[string]any{"bad": {"InstanceType": "m5.large", "ImageId": "ami-1", "BlockDeviceMappings": []any{map[string]any{"Ebs": map[string]any{"VolumeSize": "big"}}}}}}); err == nil ||
		!strings.Contains(err.Error(), "available_node_types.bad.node_config") || !strings.Contains(err.Error(), "VolumeSize") {
		t.Fatalf("err = %v, want the field named", err)
	}
	ignored := IgnoredKeys(map[string]any{"InstanceType": "m5.large", "SubnetIds": []any{"s"}, "UserData": "x", "Colour": "red"})
	if !slices.Equal(ignored, []string{"Colour", "UserData"}) {
		t.Fatalf("IgnoredKeys = %v", ignored)
	}
}
