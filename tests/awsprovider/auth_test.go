package awsprovider_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/raygo-dev/raygo/autoscaler/provider/aws"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// With auth on, the instances the head's autoscaler launches through EC2 (moto) carry in
// their user data the autoscaler's node-scoped token, written to a file for
// RAYGO_AUTH_TOKEN_PATH, and never the cluster token (user data is readable by whoever
// may describe the instance). The instances are not booted: the user data is read back
// from EC2.
func TestWithAuthOnTheUserDataCarriesANodeTokenAndNotTheClusterToken(t *testing.T) {
	const name = "awsauth"
	c, _ := newMotoCloud(t)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(c.yaml(name, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	harness.Binary(t) // built with the machine's caches before HOME changes
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	t.Setenv("RAYGO_AUTH_TOKEN_PATH", "")
	home := t.TempDir()
	head := harness.StartHeadWithEnv(t, append([]string{"HOME=" + home, "RAYGO_AUTH_MODE=token"}, c.env...), "--num-cpus", "1", "--autoscaling-config", path)
	cluster := harness.HeadToken(t, home)
	t.Setenv("RAYGO_AUTH_TOKEN", cluster)
	gcs := dialGCS(t, head.GCSAddress)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := gcs.pgs.CreatePlacementGroup(ctx, &pb.CreatePlacementGroupRequest{Strategy: "PACK", Lifetime: "detached",
		Bundles: []*pb.CreatePlacementGroupRequest_BundleSpec{{Resources: map[string]float64{"CPU": 4}}}}); err != nil {
		t.Fatal(err)
	}
	var script string
	harness.Eventually(t, 90*time.Second, "an instance launched for the group", func() error {
		live := c.live(t, name)
		if len(live) == 0 {
			return fmt.Errorf("no instance of cluster %s", name)
		}
		out, err := c.moto.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: live[0].InstanceId,
			Attribute: types.InstanceAttributeNameUserData})
		if err != nil {
			return err
		}
		decoded, err := base64.StdEncoding.DecodeString(awssdk.ToString(out.UserData.Value))
		script = string(decoded)
		return err
	})
	if strings.Contains(script, cluster) {
		t.Fatalf("the user data carries the cluster token:\n%s", script)
	}
	exported := "export RAYGO_AUTH_TOKEN_PATH='" + aws.NodeTokenPath + "'"
	if !strings.Contains(script, exported) {
		t.Fatalf("the user data lacks %q:\n%s", exported, script)
	}
	// The token it writes is the one the head issued its autoscaler: a node token.
	stdout, stderr, code := head.Run("auth", "list")
	if code != 0 || strings.Count(stdout, " node ") != 1 {
		t.Fatalf("auth list: exit %d, %q %s; want one node token", code, stdout, stderr)
	}
	sessionToken, err := filepath.Glob(filepath.Join(head.Head.SessionDir, "autoscaler_node_token"))
	if err != nil || len(sessionToken) != 1 {
		t.Fatalf("the autoscaler's token file: %v %v", sessionToken, err)
	}
	nodeToken, err := os.ReadFile(sessionToken[0])
	if err != nil || !strings.Contains(script, "'"+strings.TrimSpace(string(nodeToken))+"' > '"+aws.NodeTokenPath+"'") {
		t.Fatalf("the user data does not write the autoscaler's node token (%v):\n%s", err, script)
	}
}
