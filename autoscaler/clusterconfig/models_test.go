package clusterconfig_test

import (
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/autoscaler/clusterconfig"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// The models gpu_model may name are the simulated machines raylets can run: the table
// is restated in clusterconfig because the autoscaler does not import the raylet.
func TestGPUModelsMatchSimulatedMachines(t *testing.T) {
	if got, want := clusterconfig.GPUModels(), gpusim.SimulatedModels(); !slices.Equal(got, want) {
		t.Errorf("clusterconfig.GPUModels() = %v, gpusim.SimulatedModels() = %v", got, want)
	}
	for _, instanceType := range []string{"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"} {
		model, ok := clusterconfig.InstanceTypeModel(instanceType)
		if !ok || !slices.Contains(gpusim.SimulatedModels(), model) {
			t.Errorf("instance type %s: model %q, %v", instanceType, model, ok)
		}
	}
}
