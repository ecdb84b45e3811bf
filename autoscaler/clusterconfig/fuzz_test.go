package clusterconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: no input makes Parse panic; a refused input gives Errors with one problem
// per line; an accepted one gives node types for the planner.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../examples/autoscaler/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(base))
	f.Add([]byte(withGPUType(`{node_config: {InstanceType: p5.48xlarge}, resources: {GPU: 4}}`, `{gpu_model: x, nvlink_islands: [0, 9]}`)))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("cluster_name: c\nprovider: {type: aws, raygo: {disruption: {max_unavailable: '7%'}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		config, err := Parse(data)
		if err != nil {
			var list Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			if strings.Count(err.Error(), "\n") != len(list)-1 {
				t.Fatalf("a problem spans lines: %q", err.Error())
			}
			return
		}
		for _, nodeType := range config.WorkerTypes() {
			config.NodeCommands(nodeType.Name, false)
		}
		config.HeadType()
		config.Provider.Raygo.MaxUnavailable.Resolve(len(data))
	})
}
