package gpu

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/raygo-dev/raygo/internal/mig"
)

// Activity is what one whole GPU or one MIG instance did, as one ActivitySampler.Sample
// read it. The Has… fields say which readings the device gave.
type Activity struct {
	// GPU is the NVML index of the GPU (the parent GPU of a MIG instance); UUID and Model
	// are the GPU's, as DCGM labels a MIG instance with its parent's.
	GPU         int
	UUID, Model string
	// MIG is set for a MIG instance, nil for a whole GPU.
	MIG *MIGActivity

	// HasGPM: SMActive and GraphicsActive were measured through GPU performance
	// monitoring (Hopper and later) over the interval since the previous Sample. Ratios 0
	// to 1, as DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_GR_ENGINE_ACTIVE.
	HasGPM                   bool
	SMActive, GraphicsActive float64
	// HasUtilization: Utilization is GetUtilizationRates' GPU figure, the share of the
	// driver's last period in which a kernel ran, as a ratio 0 to 1 (DCGM_FI_DEV_GPU_UTIL
	// is the same in percent). NVML gives it for whole GPUs only.
	HasUtilization bool
	Utilization    float64
	// HasMemory: FBUsedBytes is the frame buffer in use (GetMemoryInfo).
	HasMemory   bool
	FBUsedBytes uint64
}

// MIGActivity names a MIG instance as DCGM does.
type MIGActivity struct {
	// GPUInstanceID is the GPU instance id (DCGM's GPU_I_ID).
	GPUInstanceID int
	// Profile is the GPU instance profile's name, "1g.10gb" (DCGM's GPU_I_PROFILE).
	Profile string
	// DeviceUUID is the MIG device's "MIG-…" UUID.
	DeviceUUID string
}

// SMBusy is the activity that says whether a GPU is working: the share of SMs busy where
// GPM measures it, else the share of time a kernel ran. ok is false when neither was
// measured (a MIG instance without GPM, or a GPU's first GPM sample on a GPU that gives
// no utilization rates).
func (a Activity) SMBusy() (busy float64, ok bool) {
	switch {
	case a.HasGPM:
		return a.SMActive, true
	case a.HasUtilization:
		return a.Utilization, true
	}
	return 0, false
}

// ActivitySampler reads each GPU's and MIG instance's activity and memory use through
// NVML: GPM where the GPU supports it (its first Sample only takes the first GPM sample;
// the values come from the second on), utilization rates otherwise, memory used always.
// A GPU in MIG mode is read per instance (GpmMigSampleGet), as DCGM does.
//
// Concurrency: not safe for concurrent use; one goroutine calls Sample, then Close.
type ActivitySampler struct {
	lib nvml.Interface
	// started: Init was tried; unavailable holds its failure, returned ever after.
	started     bool
	unavailable error
	// gpmSymbols: the loaded library exports the GPM functions.
	gpmSymbols bool
	// gpm holds two sample buffers per GPU or MIG instance measured through GPM.
	gpm map[gpmSource]*gpmBuffers
}

// gpmSource names what a GPM sample is taken on: a GPU, or a GPU instance of it (a new
// instance with a reused id has another MIG device UUID).
type gpmSource struct {
	gpuUUID, migUUID string
	gpuInstanceID    int
}

type gpmBuffers struct {
	previous, next nvml.GpmSample
	hasPrevious    bool
	seen           bool // in the current Sample
}

// NewActivitySampler reads the GPUs of lib (nvml.New() for the real library). NVML is
// initialised at the first Sample.
func NewActivitySampler(lib nvml.Interface) *ActivitySampler {
	return &ActivitySampler{lib: lib, gpm: map[gpmSource]*gpmBuffers{}}
}

// gpmFunctions are the NVML symbols GPM needs (driver 520 and later).
var gpmFunctions = []string{"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet"}

// Sample reads every GPU once. Without NVML (no libnvidia-ml.so, or no driver) it returns
// an error wrapping ErrNVMLUnavailable, then the same error at every later call, without
// calling NVML again. A GPU that fails a query is left out of this sample.
func (s *ActivitySampler) Sample() (activity []Activity, err error) {
	if !s.started {
		s.started = true
		if err := initNVML(s.lib); err != nil {
			s.unavailable = err
			return nil, err
		}
		s.gpmSymbols = true
		for _, symbol := range gpmFunctions {
			s.gpmSymbols = s.gpmSymbols && hasSymbol(s.lib, symbol)
		}
	}
	if s.unavailable != nil {
		return nil, s.unavailable
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("NVML panicked reading GPU activity: %v", r)
		}
	}()
	_, handles, err := listDevices(s.lib)
	if err != nil {
		return nil, err
	}
	for _, b := range s.gpm {
		b.seen = false
	}
	for index, handle := range handles {
		activity = append(activity, s.sampleGPU(index, handle)...)
	}
	for source, b := range s.gpm {
		if !b.seen {
			b.free(s.lib)
			delete(s.gpm, source)
		}
	}
	return activity, nil
}

// initNVML is lib.Init, with go-nvml's panic on a library without the symbol turned into
// ErrNVMLUnavailable.
func initNVML(lib nvml.Interface) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrNVMLUnavailable, r)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: Init: %s", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	return nil
}

// sampleGPU reads one GPU: the GPU itself, or its MIG instances when it is in MIG mode.
func (s *ActivitySampler) sampleGPU(index int, handle nvml.Device) []Activity {
	gpu := Activity{GPU: index}
	var ret nvml.Return
	if gpu.UUID, ret = handle.GetUUID(); ret != nvml.SUCCESS {
		return nil
	}
	gpu.Model, _ = handle.GetName()
	gpmSupported := false
	if s.gpmSymbols {
		support, ret := handle.GpmQueryDeviceSupport()
		gpmSupported = ret == nvml.SUCCESS && support.IsSupportedDevice != 0
	}
	if current, _, ret := handle.GetMigMode(); ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
		return s.sampleMIGInstances(gpu, handle, gpmSupported)
	}
	if mem, ret := handle.GetMemoryInfo(); ret == nvml.SUCCESS {
		gpu.HasMemory, gpu.FBUsedBytes = true, mem.Used
	}
	if rates, ret := handle.GetUtilizationRates(); ret == nvml.SUCCESS {
		gpu.HasUtilization, gpu.Utilization = true, float64(min(rates.Gpu, 100))/100
	}
	if gpmSupported {
		gpu.HasGPM, gpu.SMActive, gpu.GraphicsActive = s.gpmMetrics(gpmSource{gpuUUID: gpu.UUID}, func(sample nvml.GpmSample) nvml.Return {
			return handle.GpmSampleGet(sample)
		})
	}
	return []Activity{gpu}
}

// sampleMIGInstances reads the MIG devices of a GPU in MIG mode. NVML numbers them
// 0..GetMaxMigDeviceCount-1 with gaps (ERROR_NOT_FOUND).
func (s *ActivitySampler) sampleMIGInstances(gpu Activity, handle nvml.Device, gpmSupported bool) []Activity {
	count, ret := handle.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	model, _ := mig.ModelOfDevice(gpu.Model)
	var instances []Activity
	for i := 0; i < count; i++ {
		device, ret := handle.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		giid, ret := device.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			continue
		}
		uuid, ret := device.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		instance := gpu
		instance.MIG = &MIGActivity{GPUInstanceID: giid, DeviceUUID: uuid, Profile: migProfileName(handle, device, giid, model)}
		if mem, ret := device.GetMemoryInfo(); ret == nvml.SUCCESS {
			instance.HasMemory, instance.FBUsedBytes = true, mem.Used
		}
		if gpmSupported {
			source := gpmSource{gpuUUID: gpu.UUID, migUUID: uuid, gpuInstanceID: giid}
			instance.HasGPM, instance.SMActive, instance.GraphicsActive = s.gpmMetrics(source, func(sample nvml.GpmSample) nvml.Return {
				return handle.GpmMigSampleGet(giid, sample)
			})
		}
		instances = append(instances, instance)
	}
	return instances
}

// migProfileName names a MIG device's GPU instance profile as nvidia-smi and DCGM do,
// "1g.10gb": from its profile id and the model's tables, else from the MIG device's name
// ("NVIDIA H100 80GB HBM3 MIG 1g.10gb").
func migProfileName(parent, device nvml.Device, giid int, model mig.Model) string {
	if gi, ret := parent.GetGpuInstanceById(giid); ret == nvml.SUCCESS {
		if info, ret := gi.GetInfo(); ret == nvml.SUCCESS {
			if profile, ok := model.ProfileByID(int(info.ProfileId)); ok {
				return profile.Name
			}
		}
	}
	if name, ret := device.GetName(); ret == nvml.SUCCESS {
		if _, profile, found := strings.Cut(name, " MIG "); found {
			return profile
		}
	}
	return ""
}

// gpmMetrics takes a GPM sample with take and returns SM and graphics activity (0 to 1)
// between it and the source's previous sample; ok is false at a source's first sample or
// when NVML refuses.
func (s *ActivitySampler) gpmMetrics(source gpmSource, take func(nvml.GpmSample) nvml.Return) (ok bool, smActive, graphicsActive float64) {
	b := s.gpm[source]
	if b == nil {
		b = &gpmBuffers{}
		var ret1, ret2 nvml.Return
		b.previous, ret1 = s.lib.GpmSampleAlloc()
		b.next, ret2 = s.lib.GpmSampleAlloc()
		if ret1 != nvml.SUCCESS || ret2 != nvml.SUCCESS {
			b.free(s.lib)
			return false, 0, 0
		}
		s.gpm[source] = b
	}
	b.seen = true
	if take(b.next) != nvml.SUCCESS {
		b.hasPrevious = false
		return false, 0, 0
	}
	if b.hasPrevious {
		request := nvml.GpmMetricsGetType{Version: nvml.GPM_METRICS_GET_VERSION, NumMetrics: 2, Sample1: b.previous, Sample2: b.next}
		request.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
		request.Metrics[1].MetricId = uint32(nvml.GPM_METRIC_GRAPHICS_UTIL)
		if s.lib.GpmMetricsGet(&request) == nvml.SUCCESS &&
			request.Metrics[0].NvmlReturn == uint32(nvml.SUCCESS) && request.Metrics[1].NvmlReturn == uint32(nvml.SUCCESS) {
			ok = true
			smActive = min(max(request.Metrics[0].Value/100, 0), 1)
			graphicsActive = min(max(request.Metrics[1].Value/100, 0), 1)
		}
	}
	b.previous, b.next, b.hasPrevious = b.next, b.previous, true
	return ok, smActive, graphicsActive
}

func (b *gpmBuffers) free(lib nvml.Interface) {
	for _, sample := range []nvml.GpmSample{b.previous, b.next} {
		if sample != nil {
			lib.GpmSampleFree(sample)
		}
	}
}

// Close frees the GPM samples and shuts NVML down; Sample must not be called after it.
func (s *ActivitySampler) Close() {
	if !s.started || s.unavailable != nil {
		return
	}
	defer func() { _ = recover() }()
	for source, b := range s.gpm {
		b.free(s.lib)
		delete(s.gpm, source)
	}
	s.lib.Shutdown()
	s.unavailable = fmt.Errorf("%w: sampler closed", ErrNVMLUnavailable)
}
