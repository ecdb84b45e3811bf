package provider_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/raygo-dev/raygo/autoscaler/provider"
)

func TestNodeArgs(t *testing.T) {
	args, err := provider.NodeArgs(map[string]float64{"CPU": 16, "GPU": 8, "memory": 1e9, "accelerator_x": 2}, "dgx-h100",
		map[string]string{"zone": "a", "market": "spot"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	want := `--resources {"accelerator_x":2,"memory":1000000000} --num-cpus 16 --num-gpus 8 --gpu-sim dgx-h100 --labels market=spot,zone=a`
	for _, part := range strings.Split(want, " --") {
		if !strings.Contains(got, strings.TrimPrefix(part, "--")) {
			t.Fatalf("args %q lack %q", got, part)
		}
	}
	if slices.Contains(args, "--resources") && strings.Contains(got, `"CPU"`) {
		t.Fatalf("CPU passed in --resources: %q", got)
	}
}
