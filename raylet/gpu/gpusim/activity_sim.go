package gpusim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// Simulated activity: what the simulated GPUs and MIG instances are doing, read from a
// control file that tests (or a person) write, and answered through the NVML functions
// real hardware answers it with. See the package doc for the file format.

// ActivityFileName is the control file's name in the simulation directory
// (`raygo start --gpu-sim`: the session directory).
const ActivityFileName = "gpu-activity.json"

// SimActivity is what one simulated GPU or MIG instance is doing.
type SimActivity struct {
	// SMActive is the share of SMs busy, 0 to 1 (GPM's SM utilization,
	// DCGM_FI_PROF_SM_ACTIVE).
	SMActive float64 `json:"sm_active"`
	// GrEngineActive is the share of time the graphics/compute engine was busy, 0 to 1
	// (GPM's graphics utilization, DCGM_FI_PROF_GR_ENGINE_ACTIVE); also what
	// GetUtilizationRates reports as the GPU's utilization, in percent.
	GrEngineActive float64 `json:"gr_engine_active"`
	// FBUsedBytes is the frame buffer in use (GetMemoryInfo's Used), capped at the
	// device's total.
	FBUsedBytes uint64 `json:"fb_used_bytes"`
}

// SimActivityFile is the control file: activity by device key. A whole GPU takes the
// entry of its UUID, else of its index ("3"), else "*"; a MIG instance takes the entry of
// its MIG device UUID ("MIG-…"), else "<GPU index>/<GPU instance id>" ("0/7"). A device
// without an entry is idle with no memory used.
type SimActivityFile struct {
	GPUs map[string]SimActivity `json:"gpus"`
}

// WriteSimActivity writes the control file at path atomically (a temporary file renamed
// over it), so a simulated node never reads half of it.
func WriteSimActivity(path string, activity SimActivityFile) error {
	raw, err := json.MarshalIndent(activity, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gpu-activity-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// simActivity reads the control file at every query, so a change shows at the next
// sample; a file that does not parse keeps the last one that did.
type simActivity struct {
	path string
	mu   sync.Mutex
	last SimActivityFile
}

// lookup returns the entry of the first key present.
func (a *simActivity) lookup(keys ...string) SimActivity {
	if a == nil || a.path == "" {
		return SimActivity{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	raw, err := os.ReadFile(a.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		a.last = SimActivityFile{}
	case err == nil:
		var parsed SimActivityFile
		if json.Unmarshal(raw, &parsed) == nil {
			a.last = parsed
		}
	}
	for _, key := range keys {
		if entry, ok := a.last.GPUs[key]; ok {
			return entry
		}
	}
	return SimActivity{}
}

func (a *simActivity) gpu(d *dgxa100.Device) SimActivity {
	return a.lookup(d.UUID, strconv.Itoa(d.Index), "*")
}

func memoryUsed(total, used uint64) nvml.Memory {
	used = min(used, total)
	return nvml.Memory{Total: total, Used: used, Free: total - used}
}

func percent(ratio float64) uint32 {
	return uint32(math.Round(min(max(ratio, 0), 1) * 100))
}

// gpmSupported: GPU performance monitoring came with Hopper.
func gpmSupported(arch nvml.DeviceArchitecture) bool {
	return arch >= nvml.DEVICE_ARCH_HOPPER && arch != nvml.DEVICE_ARCH_UNKNOWN
}

// installActivity gives a whole GPU the activity functions: memory used, utilization
// rates, and GPM on Hopper and later (ERROR_NOT_SUPPORTED before, as hardware).
func installActivity(d *dgxa100.Device, arch nvml.DeviceArchitecture, activity *simActivity, mig *simMIG) {
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return memoryUsed(d.MemoryInfo.Total, activity.gpu(d).FBUsedBytes), nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: percent(activity.gpu(d).GrEngineActive)}, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		support := nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION}
		if gpmSupported(arch) {
			support.IsSupportedDevice = 1
		}
		return support, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(sample nvml.GpmSample) nvml.Return {
		if !gpmSupported(arch) {
			return nvml.ERROR_NOT_SUPPORTED
		}
		s, ok := sample.(*simGpmSample)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return s.record(d.UUID, activity.gpu(d))
	}
	d.GpmMigSampleGetFunc = func(gpuInstanceID int, sample nvml.GpmSample) nvml.Return {
		if !gpmSupported(arch) || mig == nil {
			return nvml.ERROR_NOT_SUPPORTED
		}
		s, ok := sample.(*simGpmSample)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		keys, ret := mig.gpus[d.Index].instanceActivityKeys(gpuInstanceID)
		if ret != nvml.SUCCESS {
			return ret
		}
		return s.record(fmt.Sprintf("%s/%d", d.UUID, gpuInstanceID), activity.lookup(keys...))
	}
}

// instanceActivityKeys are the control-file keys of a live GPU instance: its MIG devices'
// UUIDs, then "<index>/<id>".
func (g *simMIGGPU) instanceActivityKeys(gpuInstanceID int) ([]string, nvml.Return) {
	g.node.mu.Lock()
	defer g.node.mu.Unlock()
	if !g.enabled {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	for _, gi := range g.gpuInstances {
		if gi == nil || gi.destroyed || gi.id != gpuInstanceID {
			continue
		}
		var keys []string
		for _, ci := range gi.computeInstances {
			if ci != nil && !ci.destroyed && ci.migDevice != nil {
				keys = append(keys, ci.migDevice.uuid)
			}
		}
		return append(keys, fmt.Sprintf("%d/%d", g.index, gpuInstanceID)), nvml.SUCCESS
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// simGpmSample is a GPM sample buffer: which device or GPU instance it was taken on and
// the activity then.
type simGpmSample struct {
	mu       sync.Mutex
	source   string // "" until taken
	activity SimActivity
	freed    bool
}

func (s *simGpmSample) record(source string, activity SimActivity) nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	s.source, s.activity = source, activity
	return nvml.SUCCESS
}

func (s *simGpmSample) Free() nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	s.freed = true
	return nvml.SUCCESS
}

func (s *simGpmSample) Get(device nvml.Device) nvml.Return { return device.GpmSampleGet(s) }

func (s *simGpmSample) MigGet(device nvml.Device, gpuInstanceID int) nvml.Return {
	return device.GpmMigSampleGet(gpuInstanceID, s)
}

func (s *simGpmSample) taken() (string, SimActivity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source, s.activity, s.source != "" && !s.freed
}

// simGpmMetricsGet answers the metrics between two samples of one device or GPU
// instance. The control file is read only at sample times, so the interval's activity is
// the one the second sample saw: a change shows in the next pair of samples. Only SM and
// graphics utilization are simulated; other metrics answer ERROR_NOT_SUPPORTED each.
func simGpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	m.Version = nvml.GPM_METRICS_GET_VERSION // as go-nvml's GpmMetricsGet sets it
	first, ok1 := m.Sample1.(*simGpmSample)
	second, ok2 := m.Sample2.(*simGpmSample)
	if !ok1 || !ok2 || m.NumMetrics > uint32(len(m.Metrics)) {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	source1, _, taken1 := first.taken()
	source2, activity, taken2 := second.taken()
	if !taken1 || !taken2 || source1 != source2 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	for i := range m.NumMetrics {
		metric := &m.Metrics[i]
		metric.NvmlReturn, metric.Value = uint32(nvml.SUCCESS), 0
		switch nvml.GpmMetricId(metric.MetricId) {
		case nvml.GPM_METRIC_SM_UTIL:
			metric.Value = min(max(activity.SMActive, 0), 1) * 100
		case nvml.GPM_METRIC_GRAPHICS_UTIL:
			metric.Value = min(max(activity.GrEngineActive, 0), 1) * 100
		default:
			metric.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
	}
	return nvml.SUCCESS
}

// installGPM gives the simulated library its GPM functions; the device forms answer.
func installGPM(s *dgxa100.Server) {
	s.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) { return &simGpmSample{}, nvml.SUCCESS }
	s.GpmSampleFreeFunc = func(sample nvml.GpmSample) nvml.Return {
		if sample == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return sample.Free()
	}
	s.GpmMetricsGetFunc = simGpmMetricsGet
	s.GpmSampleGetFunc = func(device nvml.Device, sample nvml.GpmSample) nvml.Return {
		if device == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return device.GpmSampleGet(sample)
	}
	s.GpmMigSampleGetFunc = func(device nvml.Device, gpuInstanceID int, sample nvml.GpmSample) nvml.Return {
		if device == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return device.GpmMigSampleGet(gpuInstanceID, sample)
	}
}
