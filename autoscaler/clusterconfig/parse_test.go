package clusterconfig

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
)

// base is a small valid config; cases add or replace lines in it.
const base = `
cluster_name: test
provider:
  type: fake_multinode
head_node_type: head
available_node_types:
  head:
    node_config: {}
    resources: {CPU: 2}
  gpu:
    node_config: {}
    resources: {CPU: 8, GPU: 8}
`

func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/autoscaler/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples/autoscaler: %v, %d files", err, len(files))
	}
	for _, file := range files {
		config, err := Load(file)
		if err != nil {
			t.Errorf("%s:\n%v", file, err)
			continue
		}
		if types := config.WorkerTypes(); len(types) < 2 {
			t.Errorf("%s: %d node types", file, len(types))
		}
	}
}

func TestDefaults(t *testing.T) {
	config, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if config.MaxWorkers != 2 || config.UpscalingSpeed != 1 || config.IdleTimeout != 5*time.Minute {
		t.Errorf("cluster defaults: max_workers %d, upscaling_speed %v, idle timeout %v; want 2, 1, 5m",
			config.MaxWorkers, config.UpscalingSpeed, config.IdleTimeout)
	}
	if config.Provider.Raygo.MaxUnavailable != (MaxUnavailable{Percent: 10}) {
		t.Errorf("max_unavailable default %v, want 10%%", config.Provider.Raygo.MaxUnavailable)
	}
	head, gpu := config.NodeTypes["head"], config.NodeTypes["gpu"]
	if head.MinWorkers != 0 || head.MaxWorkers != 0 {
		t.Errorf("head type min/max workers %d/%d, want 0/0 (Ray's default for the head's type)", head.MinWorkers, head.MaxWorkers)
	}
	if gpu.MinWorkers != 0 || gpu.MaxWorkers != 2 || gpu.IdleTimeout != nil {
		t.Errorf("worker type min/max %d/%d idle %v, want 0/2 (the cluster's max_workers) and nil", gpu.MinWorkers, gpu.MaxWorkers, gpu.IdleTimeout)
	}
	types := config.WorkerTypes()
	if len(types) != 2 || types[0].Name != "gpu" || types[1].Name != "head" {
		t.Fatalf("WorkerTypes names: %v", types)
	}
	want := resources.Set{"CPU": 8 * resources.AmountScale, "GPU": 8 * resources.AmountScale}
	if got := types[0]; !got.Resources.Equal(want) || got.IdleTimeout != 5*time.Minute || got.Labels[nodelabel.NodeType] != "gpu" || got.GPUModel != "" || len(got.GPUIslands) != 0 {
		t.Errorf("gpu type: %+v", got)
	}
	if config.HeadType().Name != "head" || len(config.Ignored) != 0 {
		t.Errorf("head %q, ignored %v", config.HeadType().Name, config.Ignored)
	}
}

func TestSettingsHonoured(t *testing.T) {
	config, err := Parse([]byte(`
cluster_name: c
max_workers: 10
upscaling_speed: 0.5
idle_timeout_minutes: 2
provider:
  type: aws
  region: us-west-2
  cache_stopped_nodes: false
  raygo:
    node_types:
      a: {price_per_hour: 3.5, rack: r1, scalable_unit: su2, expected_launch_s: 90}
    disruption: {max_unavailable: 3}
head_node_type: h
initialization_commands: [init]
setup_commands: [common]
head_setup_commands: [head-only]
worker_setup_commands: [worker-only]
docker: {image: rayproject/ray}
file_mounts: {}
available_node_types:
  h: {node_config: {}, resources: {}}
  a:
    node_config: {InstanceType: m5.large}
    resources: {CPU: 2}
    min_workers: 1
    max_workers: 3
    idle_timeout_s: 30
    priority: 7
    labels: {zone: us-west-2a}
    docker: {worker_image: x}
  b:
    node_config: {}
    resources: {CPU: 1}
    worker_setup_commands: [b-only]
`))
	if err != nil {
		t.Fatal(err)
	}
	if config.Provider.Type != "aws" || config.Provider.Region != "us-west-2" || config.Provider.Settings["cache_stopped_nodes"] != false || config.Provider.Settings["raygo"] != nil {
		t.Errorf("provider: %+v", config.Provider)
	}
	if got := config.Provider.Raygo.MaxUnavailable.Resolve(100); got != 3 {
		t.Errorf("max_unavailable 3 resolves to %d", got)
	}
	if want := []string{`available_node_types.a.docker`, "docker"}; !slices.Equal(config.Ignored, want) {
		t.Errorf("Ignored %v, want %v (file_mounts is empty)", config.Ignored, want)
	}
	a := config.WorkerTypes()[0]
	if a.Name != "a" || a.MinWorkers != 1 || a.MaxWorkers != 3 || a.IdleTimeout != 30*time.Second || a.Priority != 7 || a.PricePerHour != 3.5 ||
		a.Labels["zone"] != "us-west-2a" || a.Labels[nodelabel.Rack] != "r1" || a.Labels[nodelabel.ScalableUnit] != "su2" {
		t.Errorf("type a: %+v", a)
	}
	if config.Provider.Raygo.NodeTypes["a"].ExpectedLaunch != 90*time.Second || config.NodeTypes["a"].NodeConfig["InstanceType"] != "m5.large" {
		t.Errorf("raygo settings or node_config not kept: %+v", config.NodeTypes["a"])
	}
	for _, c := range []struct {
		nodeType           string
		head               bool
		wantInit, wantCmds []string
	}{
		{"h", true, []string{"init"}, []string{"common", "head-only"}},
		{"a", false, []string{"init"}, []string{"common", "worker-only"}},
		{"b", false, []string{"init"}, []string{"b-only"}},
	} {
		initialization, setup := config.NodeCommands(c.nodeType, c.head)
		if !slices.Equal(initialization, c.wantInit) || !slices.Equal(setup, c.wantCmds) {
			t.Errorf("NodeCommands(%s): %v, %v; want %v, %v", c.nodeType, initialization, setup, c.wantInit, c.wantCmds)
		}
	}
}

func TestGPUTopology(t *testing.T) {
	for _, c := range []struct {
		name, gpuType, raygo string
		model                string
		islands              []int
		gpus                 resources.Amount
	}{
		{"p4d fills GPU", `{node_config: {InstanceType: p4d.24xlarge}, resources: {CPU: 96}}`, ``, "dgx-a100-40gb", []int{8}, 8},
		{"p4de", `{node_config: {InstanceType: p4de.24xlarge}, resources: {GPU: 8}}`, ``, "dgx-a100-80gb", []int{8}, 8},
		{"p5", `{node_config: {InstanceType: p5.48xlarge}, resources: {GPU: 8}}`, ``, "dgx-h100", []int{8}, 8},
		{"gpu_model", `{node_config: {}, resources: {GPU: 8}}`, `{gpu_model: pcie-8gpu-nvlink-pairs}`, "pcie-8gpu-nvlink-pairs", []int{2, 2, 2, 2}, 8},
		{"gpu_model fills GPU", `{node_config: {}, resources: {}}`, `{gpu_model: gb200-nvl72}`, "gb200-nvl72", []int{4}, 4},
		{"one GPU of a model", `{node_config: {}, resources: {GPU: 1}}`, `{gpu_model: dgx-h100, nvlink_islands: [1]}`, "dgx-h100", []int{1}, 1},
		{"islands only", `{node_config: {}, resources: {GPU: 4}}`, `{nvlink_islands: [2, 2]}`, "", []int{2, 2}, 4},
		{"count only", `{node_config: {InstanceType: g5.xlarge}, resources: {GPU: 1}}`, ``, "", nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			config, err := Parse([]byte(withGPUType(c.gpuType, c.raygo)))
			if err != nil {
				t.Fatal(err)
			}
			got := config.WorkerTypes()[0]
			if got.GPUModel != c.model || !slices.Equal(got.GPUIslands, c.islands) || got.Resources[resources.GPU] != c.gpus*resources.AmountScale {
				t.Errorf("got model %q islands %v GPU %s; want %q %v %d", got.GPUModel, got.GPUIslands, got.Resources[resources.GPU], c.model, c.islands, c.gpus)
			}
		})
	}
}

// withGPUType is a config whose only worker type, gpu, is gpuType, with raygo settings.
func withGPUType(gpuType, raygo string) string {
	provider := "provider: {type: aws}"
	if raygo != "" {
		provider = "provider: {type: aws, raygo: {node_types: {gpu: " + raygo + "}}}"
	}
	return "cluster_name: c\n" + provider + "\nhead_node_type: head\navailable_node_types:\n" +
		"  head: {node_config: {}, resources: {CPU: 1}}\n  gpu: " + gpuType + "\n"
}

func TestProblems(t *testing.T) {
	const gpuPath = "available_node_types.gpu"
	const raygoPath = "provider.raygo.node_types.gpu"
	for _, c := range []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level key", base + "colour: blue\n",
			`colour: unknown key (allowed: auth, available_node_types, cluster_name, cluster_synced_files, docker, file_mounts, file_mounts_sync_continuously, head_node_type, head_setup_commands, head_start_ray_commands, idle_timeout_minutes, initialization_commands, max_workers, metadata, no_restart, provider, rsync_exclude, rsync_filter, setup_commands, upscaling_speed, worker_setup_commands, worker_start_ray_commands)`},
		{"unknown node-type key", withGPUType(`{node_config: {}, resources: {}, min_worker: 1}`, ""),
			gpuPath + `.min_worker: unknown key (allowed: docker, idle_timeout_s, initialization_commands, labels, max_workers, min_workers, node_config, priority, resources, worker_setup_commands)`},
		{"unknown provider.raygo key", withGPUType(`{node_config: {}, resources: {}}`, `{price: 1}`),
			raygoPath + `.price: unknown key (allowed: expected_launch_s, gpu_model, nvlink_islands, price_per_hour, rack, scalable_unit)`},
		{"unknown provider.raygo section", "cluster_name: c\nprovider: {type: aws, raygo: {quotas: {}}}\nhead_node_type: h\navailable_node_types: {h: {node_config: {}, resources: {}}}\n",
			`provider.raygo.quotas: unknown key (allowed: disruption, node_types)`},
		{"negative GPU", withGPUType(`{node_config: {}, resources: {GPU: -1}}`, ""), gpuPath + ".resources.GPU: must be an integer >= 0"},
		{"fractional CPU", withGPUType(`{node_config: {}, resources: {CPU: 0.5}}`, ""), gpuPath + ".resources.CPU: must be an integer >= 0"},
		{"string amount", withGPUType(`{node_config: {}, resources: {GPU: "8"}}`, ""), gpuPath + ".resources.GPU: must be an integer >= 0"},
		{"resource too large", withGPUType(`{node_config: {}, resources: {memory: 999999999999999999}}`, ""),
			gpuPath + ".resources.memory: amount must be at most 922337203685476, got 1e+18"},
		{"label not a string", withGPUType(`{node_config: {}, resources: {}, labels: {zone: 1}}`, ""), gpuPath + ".labels.zone: must be a string, got a number"},
		{"node-type label", withGPUType(`{node_config: {}, resources: {}, labels: {autoscaler.raygo.io/node-type: x}}`, ""),
			gpuPath + `.labels["autoscaler.raygo.io/node-type"]: is set by the autoscaler to the node type's name`},
		{"min over max", withGPUType(`{node_config: {}, resources: {}, min_workers: 3, max_workers: 1}`, "") + "max_workers: 5\n",
			gpuPath + ".min_workers: must be at most max_workers (1), got 3"},
		{"negative min_workers", withGPUType(`{node_config: {}, resources: {}, min_workers: -1}`, ""), gpuPath + ".min_workers: must be an integer >= 0"},
		{"sum of min_workers", withGPUType(`{node_config: {}, resources: {}, min_workers: 3, max_workers: 3}`, ""),
			"max_workers: must be at least the sum of min_workers over available_node_types (3), got 2"},
		{"negative max_workers", base + "max_workers: -1\n", "max_workers: must be an integer >= 0"},
		{"upscaling_speed type", base + "upscaling_speed: fast\n", "upscaling_speed: must be a number >= 0"},
		{"idle_timeout_s negative", withGPUType(`{node_config: {}, resources: {}, idle_timeout_s: -5}`, ""), gpuPath + ".idle_timeout_s: must be a number >= 0"},
		{"priority", withGPUType(`{node_config: {}, resources: {}, priority: high}`, ""), gpuPath + ".priority: must be an integer"},
		{"missing resources", withGPUType(`{node_config: {}}`, ""), gpuPath + ".resources: is required"},
		{"missing cluster_name", strings.Replace(base, "cluster_name: test", "", 1), "cluster_name: is required"},
		{"missing provider.type", strings.Replace(base, "type: fake_multinode", "region: x", 1), "provider.type: is required"},
		{"head_node_type unknown", strings.Replace(base, "head_node_type: head", "head_node_type: boss", 1),
			`head_node_type: names no node type of available_node_types ("boss")`},
		{"head_node_type missing", strings.Replace(base, "head_node_type: head", "", 1), "head_node_type: is required when available_node_types is set"},
		{"node type with a dot", strings.Replace(base, "  gpu:", "  gpu.large:", 1) + "    min_workers: x\n",
			`available_node_types["gpu.large"].min_workers: must be an integer >= 0`},
		{"setup command not a string", base + "setup_commands: [ok, 3]\n", "setup_commands[1]: must be a string, got a number"},
		{"ignored key of the wrong type", base + "rsync_exclude: '*.pyc'\n", "rsync_exclude: must be a list"},
		{"raygo node type not in available_node_types", strings.Replace(withGPUType(`{node_config: {}, resources: {}}`, `{}`), "gpu: {}}", "gpux: {}}", 1),
			`provider.raygo.node_types.gpux: names no node type of available_node_types`},
		{"GPU mismatch with instance type", withGPUType(`{node_config: {InstanceType: p5.48xlarge}, resources: {GPU: 4}}`, ""),
			gpuPath + ".resources.GPU: instance type p5.48xlarge has 8 GPUs in one NVLink island, got 4"},
		{"GPU mismatch with gpu_model", withGPUType(`{node_config: {}, resources: {GPU: 4}}`, `{gpu_model: pcie-8gpu-nvlink-pairs}`),
			gpuPath + ".resources.GPU: gpu_model pcie-8gpu-nvlink-pairs has 8 GPUs in NVLink islands [2 2 2 2], got 4"},
		{"gpu_model against instance type", withGPUType(`{node_config: {InstanceType: p4d.24xlarge}, resources: {}}`, `{gpu_model: dgx-h100}`),
			raygoPath + `.gpu_model: instance type p4d.24xlarge is dgx-a100-40gb, got "dgx-h100"`},
		{"unknown gpu_model", withGPUType(`{node_config: {}, resources: {}}`, `{gpu_model: tpu-v5}`),
			raygoPath + `.gpu_model: unknown GPU model "tpu-v5" (known: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, gb200-nvl72, pcie-8gpu-nvlink-pairs)`},
		{"islands sum", withGPUType(`{node_config: {}, resources: {GPU: 8}}`, `{nvlink_islands: [4, 2]}`),
			raygoPath + ".nvlink_islands: must sum to resources.GPU (8), got 6"},
		{"island zero", withGPUType(`{node_config: {}, resources: {}}`, `{nvlink_islands: [0]}`), raygoPath + ".nvlink_islands[0]: must be an integer >= 1"},
		{"island larger than the model's", withGPUType(`{node_config: {}, resources: {}}`, `{gpu_model: dgx-h100, nvlink_islands: [16]}`),
			raygoPath + ".nvlink_islands[0]: gpu_model dgx-h100 has NVLink islands of at most 8 GPUs, got 16"},
		{"islands against instance type", withGPUType(`{node_config: {InstanceType: p5.48xlarge}, resources: {}}`, `{nvlink_islands: [4, 4]}`),
			raygoPath + ".nvlink_islands: instance type p5.48xlarge has NVLink islands [8], got [4 4]"},
		{"negative price", withGPUType(`{node_config: {}, resources: {}}`, `{price_per_hour: -1}`), raygoPath + ".price_per_hour: must be a number >= 0"},
		{"not a mapping", "- a\n- b\n", "the cluster config must be a YAML mapping, got a list"},
		{"not YAML", "cluster_name: [\n", "not a valid YAML document: yaml: line 1: did not find expected node content"},
		{"duplicate key", base + "cluster_name: again\n", `not a valid YAML document: yaml: unmarshal errors: line 13: mapping key "cluster_name" already defined at line 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkOneProblem(t, c.yaml, c.want)
		})
	}
}

func checkOneProblem(t *testing.T, yaml, want string) {
	t.Helper()
	config, err := Parse([]byte(yaml))
	if err == nil {
		t.Fatalf("accepted: %+v", config)
	}
	var list Errors
	if !errors.As(err, &list) || !errors.Is(err, fielderr.ErrInvalid) {
		t.Fatalf("error %T %v is not Errors wrapping fielderr.ErrInvalid", err, err)
	}
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
}

// Problems found by the shared resource and label checks carry their messages and
// sentinels under the YAML's path.
func TestSharedChecks(t *testing.T) {
	labelErr := nodelabel.CheckLabels(map[string]string{"zone": "a b"})
	var labelProblem *fielderr.Error
	if !errors.As(labelErr, &labelProblem) {
		t.Fatal("CheckLabels accepted a value with a space")
	}
	checkOneProblem(t, withGPUType(`{node_config: {}, resources: {}, labels: {zone: "a b"}}`, ""),
		"available_node_types.gpu.labels.zone: "+labelProblem.Problem)
	var rackProblem *fielderr.Error
	errors.As(nodelabel.CheckLabels(map[string]string{nodelabel.Rack: "rack 1"}), &rackProblem)
	checkOneProblem(t, withGPUType(`{node_config: {}, resources: {}}`, `{rack: "rack 1"}`),
		"provider.raygo.node_types.gpu.rack: "+rackProblem.Problem)
	_, err := Parse([]byte(withGPUType(`{node_config: {}, resources: {}, labels: {zone: "a b"}}`, "")))
	if !errors.Is(err, nodelabel.ErrInvalidLabel) {
		t.Errorf("label problem %v does not wrap nodelabel.ErrInvalidLabel", err)
	}
	_, err = Parse([]byte(withGPUType(`{node_config: {}, resources: {memory: 999999999999999999}}`, "")))
	if !errors.Is(err, resources.ErrInvalidAmount) {
		t.Errorf("amount problem %v does not wrap resources.ErrInvalidAmount", err)
	}
}

// Every problem is reported, one per line, sorted by field.
func TestProblemsCollected(t *testing.T) {
	_, err := Parse([]byte(`
cluster_name: 3
max_workers: -2
provider: {type: aws, raygo: {disruption: {max_unavailable: 0}}}
head_node_type: h
available_node_types:
  h: {node_config: {}, resources: {GPU: -1}, extra: 1}
`))
	want := strings.Join([]string{
		`available_node_types.h.extra: unknown key (allowed: docker, idle_timeout_s, initialization_commands, labels, max_workers, min_workers, node_config, priority, resources, worker_setup_commands)`,
		`available_node_types.h.resources.GPU: must be an integer >= 0`,
		`cluster_name: is required`,
		`cluster_name: must be a string, got a number`,
		`max_workers: must be an integer >= 0`,
		`provider.raygo.disruption.max_unavailable: must be an integer >= 1 or a percentage from "1%" to "100%"`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestMaxUnavailable(t *testing.T) {
	for _, c := range []struct {
		yaml      string
		nodes     int
		want      int
		wantError bool
	}{
		{`"10%"`, 100, 10, false},
		{`"10%"`, 5, 1, false}, // rounded down, at least 1
		{`"25%"`, 10, 2, false},
		{`"100%"`, 7, 7, false},
		{`3`, 100, 3, false},
		{`3`, 2, 3, false},
		{`0`, 0, 0, true},
		{`"0%"`, 0, 0, true},
		{`"101%"`, 0, 0, true},
		{`"3"`, 0, 0, true},
		{`"1.5%"`, 0, 0, true},
		{`"-5%"`, 0, 0, true},
		{`1.5`, 0, 0, true},
		{`[1]`, 0, 0, true},
	} {
		yaml := strings.Replace(base, "type: fake_multinode", "type: fake_multinode\n  raygo: {disruption: {max_unavailable: "+c.yaml+"}}", 1)
		config, err := Parse([]byte(yaml))
		if c.wantError {
			want := `provider.raygo.disruption.max_unavailable: must be an integer >= 1 or a percentage from "1%" to "100%"`
			if err == nil || err.Error() != want {
				t.Errorf("max_unavailable %s: got %v, want %s", c.yaml, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("max_unavailable %s: %v", c.yaml, err)
			continue
		}
		if got := config.Provider.Raygo.MaxUnavailable.Resolve(c.nodes); got != c.want {
			t.Errorf("max_unavailable %s of %d nodes: %d, want %d", c.yaml, c.nodes, got, c.want)
		}
	}
	if m, err := ParseMaxUnavailable("15%"); err != nil || m.String() != "15%" {
		t.Errorf(`ParseMaxUnavailable("15%%") = %v, %v`, m, err)
	}
	if m, err := ParseMaxUnavailable("4"); err != nil || m.String() != "4" || m.Resolve(1) != 4 {
		t.Errorf(`ParseMaxUnavailable("4") = %v, %v`, m, err)
	}
}

// A Config built in Go is held to the same rules.
func TestValidateBuiltConfig(t *testing.T) {
	config := DefaultConfig()
	if err := config.Validate(); err == nil || !strings.Contains(err.Error(), "cluster_name: is required") {
		t.Fatalf("empty default config: %v", err)
	}
	config.ClusterName = "c"
	config.Provider.Type = "aws"
	config.HeadNodeType = "h"
	config.NodeTypes["h"] = NodeTypeConfig{Resources: map[string]int64{"CPU": 4}}
	if err := config.Validate(); err != nil {
		t.Fatal(err)
	}
	config.Provider.Raygo.MaxUnavailable = MaxUnavailable{}
	if err := config.Validate(); err == nil {
		t.Error("a zero MaxUnavailable was accepted")
	}
}
