// Package tracereplay replays a GPU cluster trace (the Alibaba "openb" trace of
// "Beware of Fragmentation", Weng et al., USENIX ATC 2023) through placement policies:
// raygo's own placement core and the paper's policies (FGD, best-fit, dot-product, GPU
// packing, GPU clustering, random-fit), each on the same seeded task stream, and reads
// how much of the cluster's GPU stays unallocated as tasks arrive.
//
// Like placement it is pure: the clock is simulated (one arrival after another), the
// randomness is seeded and nothing is read or written here but what the caller passes
// in; ParseNodes and ParseTasks read CSV from bytes, and the caller (the
// benchmark, the tests) opens the files.
package tracereplay

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
)

// MilliPerGPU is one whole GPU in the trace's gpu_milli unit.
const MilliPerGPU = 1000

// NodeSpec is one row of the trace's node list (openb_node_list_*.csv).
type NodeSpec struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	// Model is the GPU model ("V100M32", "T4", undisclosed "G2"...), "" without GPUs.
	Model string
}

// Task is one row of the trace's task list (openb_pod_list_*.csv).
type Task struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	// GPUs is num_gpu (0-8); GPUMilli is gpu_milli, what it takes of each of its GPUs
	// (1000: whole GPUs; less, with GPUs == 1: a share of one GPU).
	GPUs     int
	GPUMilli int64
	// GPUModels are the models gpu_spec accepts ("V100M16|V100M32"); empty: any.
	GPUModels []string
	// QoS is the qos column (LS, Burstable, BE, Guaranteed), "" where the list has none.
	QoS string
	// CreationS and DeletionS are creation_time and deletion_time in seconds from the
	// trace's start (0 where the list has none).
	CreationS, DeletionS int64
}

// GPUMilliTotal is the GPU the task asks for in all, in milli-GPUs.
func (t *Task) GPUMilliTotal() int64 {
	if t.GPUs == 0 {
		return 0
	}
	return int64(t.GPUs) * t.GPUMilli
}

// fractional reports whether the task shares one GPU.
func (t *Task) fractional() bool { return t.GPUs == 1 && t.GPUMilli < MilliPerGPU }

// acceptsModel reports whether gpu_spec allows a node with this GPU model.
func (t *Task) acceptsModel(model string) bool {
	if len(t.GPUModels) == 0 {
		return true
	}
	for _, accepted := range t.GPUModels {
		if accepted == model {
			return true
		}
	}
	return false
}

// ParseNodes reads a node list: the header names the columns (sn, cpu_milli,
// memory_mib, gpu, model). Errors name the line and column.
func ParseNodes(data []byte) ([]NodeSpec, error) {
	rows, columns, err := readCSV(data, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	nodes := make([]NodeSpec, 0, len(rows))
	for i, row := range rows {
		line := i + 2
		node := NodeSpec{Name: row[columns["sn"]], Model: row[columns["model"]]}
		var gpus int64
		for _, field := range []struct {
			name string
			into *int64
		}{{"cpu_milli", &node.CPUMilli}, {"memory_mib", &node.MemoryMiB}, {"gpu", &gpus}} {
			if *field.into, err = parseCount(row[columns[field.name]], line, field.name); err != nil {
				return nil, err
			}
		}
		node.GPUs = int(gpus)
		if node.GPUs > 64 {
			return nil, fmt.Errorf("line %d: gpu: %d GPUs on one node, at most 64 are supported", line, node.GPUs)
		}
		if node.GPUs == 0 || node.Model == "nan" {
			node.Model = ""
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// ParseTasks reads a task list: the header names the columns (name, cpu_milli,
// memory_mib, num_gpu, gpu_milli, and gpu_spec where the list has it; others are
// ignored).
func ParseTasks(data []byte) ([]Task, error) {
	rows, columns, err := readCSV(data, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return nil, err
	}
	tasks := make([]Task, 0, len(rows))
	for i, row := range rows {
		line := i + 2
		task := Task{Name: row[columns["name"]]}
		var gpus int64
		for _, field := range []struct {
			name string
			into *int64
		}{{"cpu_milli", &task.CPUMilli}, {"memory_mib", &task.MemoryMiB}, {"num_gpu", &gpus}, {"gpu_milli", &task.GPUMilli}} {
			if *field.into, err = parseCount(row[columns[field.name]], line, field.name); err != nil {
				return nil, err
			}
		}
		task.GPUs = int(gpus)
		switch {
		case task.GPUs > 8:
			return nil, fmt.Errorf("line %d: num_gpu: %d, the trace asks for 0 to 8", line, task.GPUs)
		case task.GPUs > 0 && (task.GPUMilli <= 0 || task.GPUMilli > MilliPerGPU):
			return nil, fmt.Errorf("line %d: gpu_milli: %d with num_gpu %d, want 1 to %d", line, task.GPUMilli, task.GPUs, MilliPerGPU)
		case task.GPUs > 1 && task.GPUMilli != MilliPerGPU:
			return nil, fmt.Errorf("line %d: gpu_milli: %d with num_gpu %d, only one GPU may be shared", line, task.GPUMilli, task.GPUs)
		case task.GPUs == 0:
			task.GPUMilli = 0
		}
		if qos, ok := columns["qos"]; ok {
			task.QoS = strings.TrimSpace(row[qos])
		}
		for _, field := range []struct {
			name string
			into *int64
		}{{"creation_time", &task.CreationS}, {"deletion_time", &task.DeletionS}} {
			if column, ok := columns[field.name]; ok && strings.TrimSpace(row[column]) != "" {
				if *field.into, err = parseCount(row[column], line, field.name); err != nil {
					return nil, err
				}
			}
		}
		if task.DeletionS < task.CreationS {
			return nil, fmt.Errorf("line %d: deletion_time: %d before creation_time %d", line, task.DeletionS, task.CreationS)
		}
		if specColumn, ok := columns["gpu_spec"]; ok && row[specColumn] != "" && row[specColumn] != "nan" {
			for _, model := range strings.Split(row[specColumn], "|") {
				if model != "" {
					task.GPUModels = append(task.GPUModels, model)
				}
			}
		}
		tasks = append(tasks, task)
	}
	return tasks, nil
}

func readCSV(data []byte, required ...string) ([][]string, map[string]int, error) {
	reader := csv.NewReader(bytes.NewReader(data))
	reader.ReuseRecord = false
	header, err := reader.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	columns := make(map[string]int, len(header))
	for i, name := range header {
		columns[strings.TrimSpace(name)] = i
	}
	for _, name := range required {
		if _, ok := columns[name]; !ok {
			return nil, nil, fmt.Errorf("header: no column %q (have %s)", name, strings.Join(header, ","))
		}
	}
	rows, err := reader.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	return rows, columns, nil
}

func parseCount(value string, line int, column string) (int64, error) {
	count, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || count < 0 {
		return 0, fmt.Errorf("line %d: %s: want a whole number >= 0, got %q", line, column, value)
	}
	return count, nil
}
