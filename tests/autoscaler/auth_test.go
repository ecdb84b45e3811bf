package autoscaler_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/tests/harness"
)

// With auth on, the head gives its autoscaler a node-scoped token, not the cluster
// token, and the nodes it launches join with it: a pending group makes the autoscaler
// launch a node, whose raylet registers and takes the group; the cluster token is in
// none of the launched node's processes' environments or command lines, nor the
// autoscaler's.
func TestWithAuthOnTheAutoscalerAndTheNodesItLaunchesHoldANodeToken(t *testing.T) {
	// This process has no token but the one it reads from the head below.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("RAYGO_AUTH_TOKEN", "")
	t.Setenv("RAYGO_AUTH_TOKEN_PATH", "")
	home := t.TempDir()
	yaml := clusterYAML("auth", 2, 0, 60)
	c := harness.StartHeadWithEnv(t, []string{"HOME=" + home, "RAYGO_AUTH_MODE=token"}, "--num-cpus", "1", "--autoscaling-config", writeYAML(t, yaml))
	cluster := harness.HeadToken(t, home)
	t.Setenv("RAYGO_AUTH_TOKEN", cluster)
	a := watchAutoscaled(t, c, yaml)

	id := a.create(t, "PACK", map[string]float64{"CPU": 4})
	row := a.waitCreated(t, id)
	nodes := a.launched(t)["cpu4"]
	if len(nodes) != 1 || row.Bundles[0].NodeId != nodes[0].NodeId {
		t.Fatalf("launched cpu4 nodes %v; want one, holding the group's bundle (%v)", nodes, row.Bundles)
	}

	instances := a.instances(t)
	if len(instances) != 1 {
		t.Fatalf("instances %v, want one", instances)
	}
	launchedPIDs := descendants(instances[0].PID)
	var autoscalerPIDs []int
	for _, pid := range descendants(c.Head.SupervisorPID) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == "autoscaler" {
			autoscalerPIDs = append(autoscalerPIDs, pid)
		}
	}
	if len(launchedPIDs) < 2 || len(autoscalerPIDs) != 1 {
		t.Fatalf("the launched node's processes %v (want its supervisor and raylet at least), the autoscaler's %v (want one)", launchedPIDs, autoscalerPIDs)
	}
	for _, pid := range append(launchedPIDs, autoscalerPIDs...) {
		for _, file := range []string{"environ", "cmdline"} {
			content, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
			if err != nil {
				continue // exited since
			}
			if strings.Contains(string(content), cluster) {
				t.Errorf("process %d (%s) holds the cluster token in its %s", pid, strings.ReplaceAll(string(content[:min(len(content), 60)]), "\x00", " "), file)
			}
		}
	}
	// The autoscaler's token is a node token the head issued (auth list shows its scope).
	stdout, stderr, code := c.Run("auth", "list")
	if code != 0 || !strings.Contains(stdout, " node ") {
		t.Errorf("auth list: exit %d, %q %s; want the autoscaler's node token", code, stdout, stderr)
	}
}

// descendants returns pid and every process below it.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && i < 1000; i++ {
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(out[i]) + "/task/*/children")
		for _, file := range tasks {
			raw, _ := os.ReadFile(file)
			for _, field := range strings.Fields(string(raw)) {
				if child, err := strconv.Atoi(field); err == nil {
					out = append(out, child)
				}
			}
		}
	}
	return out
}
