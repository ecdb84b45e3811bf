package clusterconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
)

// modelIslands is every machine model raygo knows (the simulated machines of
// raylet/gpu/gpusim, where a test keeps this list in step) with the NVLink islands of
// one node, in GPU index order. The autoscaler may not import the raylet, so the
// figures are restated here: DGX A100 and H100 join their 8 GPUs through NVSwitch; the
// PCIe server bridges its cards in pairs; a GB200 NVL72 compute tray holds 4 GPUs, one
// island per node here (the rack-wide NVLink domain is found at run time, through NVML).
var modelIslands = map[string][]int{
	"dgx-a100-40gb":          {8},
	"dgx-a100-80gb":          {8},
	"dgx-h100":               {8},
	"pcie-8gpu-nvlink-pairs": {2, 2, 2, 2},
	"gb200-nvl72":            {4},
}

// ec2GPUInstanceTypes maps the EC2 GPU instance types raygo knows (node_config.InstanceType)
// to their machine model: the one place that knows them.
var ec2GPUInstanceTypes = map[string]string{
	"p4d.24xlarge":  "dgx-a100-40gb", // 8 × A100 40 GB, NVSwitch
	"p4de.24xlarge": "dgx-a100-80gb", // 8 × A100 80 GB, NVSwitch
	"p5.48xlarge":   "dgx-h100",      // 8 × H100 80 GB, NVSwitch
}

// GPUModels is the machine models gpu_model may name, sorted.
func GPUModels() []string { return slices.Sorted(maps.Keys(modelIslands)) }

// InstanceTypeModel is the machine model of an EC2 instance type raygo knows, and
// whether it knows it.
func InstanceTypeModel(instanceType string) (string, bool) {
	model, ok := ec2GPUInstanceTypes[instanceType]
	return model, ok
}

// gpuTopology is a node type's GPUs as placement sees them. gpus is resources.GPU, or
// what the instance type or model implies when resources leaves GPU out.
type gpuTopology struct {
	model   string
	islands []int
	gpus    int64
}

// resolveGPUTopology works out a type's GPU model, islands and count from, in order,
// node_config.InstanceType (when raygo knows it), provider.raygo gpu_model and
// nvlink_islands, and resources.GPU, and records every disagreement between them.
// Validate and WorkerTypes both call it, so the rule is written once.
func resolveGPUTopology(name string, nodeType NodeTypeConfig, settings RaygoNodeType, found *problems) gpuTopology {
	settingsPath := join(raygoNodeTypesPath, name)
	gpuField := join(join(join("available_node_types", name), "resources"), resources.GPU)
	var topology gpuTopology
	source := "" // what gave the model, for messages
	if instanceType, ok := nodeType.NodeConfig["InstanceType"].(string); ok {
		if model, ok := ec2GPUInstanceTypes[instanceType]; ok {
			topology.model, source = model, "instance type "+instanceType
			if settings.GPUModel != "" && settings.GPUModel != model {
				found.addf(join(settingsPath, "gpu_model"), "instance type %s is %s, got %q", instanceType, model, settings.GPUModel)
			}
		}
	}
	if topology.model == "" && settings.GPUModel != "" {
		if _, ok := modelIslands[settings.GPUModel]; !ok {
			found.addf(join(settingsPath, "gpu_model"), "unknown GPU model %q (known: %s)", settings.GPUModel, strings.Join(GPUModels(), ", "))
		} else {
			topology.model, source = settings.GPUModel, "gpu_model "+settings.GPUModel
		}
	}
	islandsField := join(settingsPath, "nvlink_islands")
	topology.islands = slices.Clone(settings.NVLinkIslands)
	modelDefault := modelIslands[topology.model]
	switch {
	case len(topology.islands) == 0:
		topology.islands = slices.Clone(modelDefault)
	case strings.HasPrefix(source, "instance type") && !slices.Equal(topology.islands, modelDefault):
		found.addf(islandsField, "%s has NVLink islands %v, got %v", source, modelDefault, topology.islands)
	default:
		largest := slices.Max(append([]int{0}, modelDefault...))
		for i, size := range topology.islands {
			if size < 1 {
				found.addf(index(islandsField, i), "must be an integer >= 1")
			} else if largest > 0 && size > largest {
				found.addf(index(islandsField, i), "%s has NVLink islands of at most %d GPUs, got %d", source, largest, size)
			}
		}
		source = "nvlink_islands"
	}
	var sum int64
	for _, size := range topology.islands {
		sum += int64(max(size, 0))
	}
	gpus, hasGPUs := nodeType.Resources[resources.GPU]
	switch {
	case len(topology.islands) == 0:
		topology.gpus = max(gpus, 0)
	case !hasGPUs:
		topology.gpus = sum
	case gpus == sum:
		topology.gpus = gpus
	case gpus < 0:
		// Reported once, as a bad amount, by the resources check.
		topology.gpus = sum
	case source == "nvlink_islands":
		found.addf(islandsField, "must sum to resources.GPU (%d), got %d", gpus, sum)
	default:
		found.addf(gpuField, "%s has %s, got %d", source, describeGPUs(topology.islands, sum), gpus)
	}
	return topology
}

func describeGPUs(islands []int, sum int64) string {
	if len(islands) == 1 {
		return fmt.Sprintf("%d GPUs in one NVLink island", sum)
	}
	return fmt.Sprintf("%d GPUs in NVLink islands %v", sum, islands)
}

// MaxUnavailable is provider.raygo.disruption.max_unavailable: how many nodes voluntary
// scale-down may take at once, as a node count or a percentage of the nodes (exactly one
// of the two is set).
type MaxUnavailable struct {
	// Nodes is a count of nodes, >= 1 (`max_unavailable: 2`).
	Nodes int
	// Percent is a percentage of the cluster's nodes, 1-100 (`max_unavailable: "10%"`).
	Percent int
}

const maxUnavailableProblem = `must be an integer >= 1 or a percentage from "1%" to "100%"`

func (m MaxUnavailable) valid() bool {
	if m.Nodes != 0 {
		return m.Nodes >= 1 && m.Percent == 0
	}
	return m.Percent >= 1 && m.Percent <= 100
}

// Resolve is the number of nodes for a cluster of nodes nodes: Nodes, or Percent of
// nodes rounded down; at least 1, so that scale-down always progresses.
func (m MaxUnavailable) Resolve(nodes int) int {
	if m.Nodes != 0 {
		return max(m.Nodes, 1)
	}
	return max(nodes*m.Percent/100, 1)
}

// String is the value as written in the YAML: "3" or "10%".
func (m MaxUnavailable) String() string {
	if m.Nodes != 0 {
		return fmt.Sprint(m.Nodes)
	}
	return fmt.Sprintf("%d%%", m.Percent)
}

// ParseMaxUnavailable reads the string form: "10%" or "3".
func ParseMaxUnavailable(text string) (MaxUnavailable, error) {
	var m MaxUnavailable
	var err error
	if digits, ok := strings.CutSuffix(text, "%"); ok {
		m.Percent, err = parseDecimal(digits)
	} else {
		m.Nodes, err = parseDecimal(text)
	}
	if err != nil || !m.valid() {
		return MaxUnavailable{}, fmt.Errorf("%w: max_unavailable %q: %s", ErrInvalidConfig, text, maxUnavailableProblem)
	}
	return m, nil
}

// parseDecimal reads plain decimal digits only (no sign, no spaces), up to 9 of them.
func parseDecimal(digits string) (int, error) {
	if digits == "" || len(digits) > 9 {
		return 0, fmt.Errorf("not a small decimal number")
	}
	value := 0
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("not a decimal number")
		}
		value = value*10 + int(r-'0')
	}
	return value, nil
}
