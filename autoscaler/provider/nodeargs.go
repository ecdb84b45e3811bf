package provider

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
)

// NodeArgs are the `raygo start` flags that give a node these resources (Ray's wire
// form), simulated GPUs of gpuModel ("" for none) and labels.
func NodeArgs(amounts map[string]float64, gpuModel string, labels map[string]string) ([]string, error) {
	var args []string
	extra := map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(amounts)) {
		amount := strconv.FormatFloat(amounts[name], 'f', -1, 64)
		switch name {
		case resources.CPU:
			args = append(args, "--num-cpus", amount)
		case resources.GPU:
			args = append(args, "--num-gpus", amount)
		case resources.ObjectStoreMemory:
			args = append(args, "--object-store-memory", amount)
		default:
			extra[name] = amounts[name]
		}
	}
	if len(extra) > 0 {
		raw, err := json.Marshal(extra)
		if err != nil {
			return nil, err
		}
		args = append(args, "--resources", string(raw))
	}
	if gpuModel != "" {
		args = append(args, "--gpu-sim", gpuModel)
	}
	if len(labels) > 0 {
		pairs := make([]string, 0, len(labels))
		for _, key := range slices.Sorted(maps.Keys(labels)) {
			pairs = append(pairs, key+"="+labels[key])
		}
		args = append(args, "--labels", strings.Join(pairs, ","))
	}
	return args, nil
}
