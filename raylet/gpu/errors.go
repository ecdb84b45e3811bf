package gpu

import "errors"

// ErrNVMLUnavailable means the NVML library could not be loaded or initialised. The caller
// logs it once and reports no GPUs; no other NVML call has been made.
var ErrNVMLUnavailable = errors.New("NVML unavailable")

// MIG errors. MIGManager's errors wrap one of these and, when NVML refused, the
// nvml.Return too (errors.Is(err, nvml.ERROR_INSUFFICIENT_RESOURCES) holds); the message
// names the GPU, the profile and the start.
var (
	// ErrMIGUnsupported: the GPU (or the loaded NVML library) cannot do MIG.
	ErrMIGUnsupported = errors.New("MIG not supported")
	// ErrMIGModeOff: the GPU's MIG mode is off, so nothing can be carved on it.
	ErrMIGModeOff = errors.New("MIG mode is off")
	// ErrMIGModePending: NVML accepted a MIG mode change that takes effect only after a
	// GPU reset (or, where reset is not exposed, a VM reboot).
	ErrMIGModePending = errors.New("MIG mode change pending a GPU reset")
	// ErrMIGUnknownProfile: the GPU has no GPU instance profile with that NVML id.
	ErrMIGUnknownProfile = errors.New("unknown MIG profile id")
	// ErrMIGInvalidStart: the start is not a valid placement of the profile
	// (NVML ERROR_INVALID_ARGUMENT).
	ErrMIGInvalidStart = errors.New("invalid MIG placement start")
	// ErrMIGSlotsTaken: the placement is valid but the GPU cannot take it as it is: it
	// overlaps an instance, or the profile's max instances, the compute slices or the one
	// media-extension instance are used up (NVML ERROR_INSUFFICIENT_RESOURCES).
	ErrMIGSlotsTaken = errors.New("MIG slots taken")
	// ErrMIGInstanceNotFound: no GPU instance starts at that memory slice.
	ErrMIGInstanceNotFound = errors.New("no MIG instance at that start")
	// ErrMIGInUse: NVML refused to destroy an instance that processes still use
	// (ERROR_IN_USE).
	ErrMIGInUse = errors.New("MIG instance in use")
)
