package gpu

import "errors"

// ErrNVMLUnavailable means the NVML library could not be loaded or initialised. The caller
// logs it once and reports no GPUs; no other NVML call has been made.
var ErrNVMLUnavailable = errors.New("NVML unavailable")

// ErrUnknownSimulatedModel means Simulate was asked for a machine it does not know; the
// wrapping error names the model and lists the valid ones.
var ErrUnknownSimulatedModel = errors.New("unknown simulated GPU model")
