// Package tracefiles finds and reads the Alibaba GPU trace for the trace replayer
// (placement/tracereplay): the thin I/O layer around the pure replayer. The folder is
// $RAYGO_TRACE_DIR, or ../shared/traces/alibaba-gpu-v2023 next to the repository
// (the trace is read where it is, never copied into the project).
package tracefiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/raygo-dev/raygo/placement/tracereplay"
)

// EnvDir names the environment variable that overrides the trace folder.
const EnvDir = "RAYGO_TRACE_DIR"

// DefaultRelativeDir is the trace folder relative to the repository root.
const DefaultRelativeDir = "../shared/traces/alibaba-gpu-v2023"

// NodeList is the node list the paper's experiments use: the GPU nodes (6,212 GPUs).
const NodeList = "openb_node_list_gpu_node.csv"

// Variants are the task lists the benchmarks replay: the full trace and the paper's
// variants with more multi-GPU tasks, more GPU sharing, and GPU-model constraints.
var Variants = []string{"default", "multigpu50", "gpushare40", "gpuspec33"}

// Dir returns the trace folder: $RAYGO_TRACE_DIR, else DefaultRelativeDir from the
// repository root (the first folder up from the working directory with a go.mod). It
// fails, naming the folder, when the folder does not hold the node list.
func Dir() (string, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		root, err := repositoryRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, DefaultRelativeDir)
	}
	if _, err := os.Stat(filepath.Join(dir, NodeList)); err != nil {
		return "", fmt.Errorf("trace folder %s (set %s to where the Alibaba GPU trace is): %w", dir, EnvDir, err)
	}
	return dir, nil
}

// Load reads the node list and the task list of variant ("default", "gpushare40"...)
// from dir.
func Load(dir, variant string) ([]tracereplay.NodeSpec, []tracereplay.Task, error) {
	nodes, err := readFile(filepath.Join(dir, NodeList), tracereplay.ParseNodes)
	if err != nil {
		return nil, nil, err
	}
	tasks, err := readFile(filepath.Join(dir, "openb_pod_list_"+variant+".csv"), tracereplay.ParseTasks)
	if err != nil {
		return nil, nil, err
	}
	return nodes, tasks, nil
}

func readFile[T any](path string, parse func([]byte) ([]T, error)) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rows, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: set " + EnvDir)
		}
		dir = parent
	}
}
