package gpusim

import "errors"

// ErrUnknownSimulatedModel means Simulate was asked for a machine it does not know; the
// wrapping error names the model and lists the valid ones.
var ErrUnknownSimulatedModel = errors.New("unknown simulated GPU model")
