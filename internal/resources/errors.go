package resources

import (
	"errors"
	"fmt"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// Sentinel errors. Validation errors are *fielderr.Error values whose Err is one of the
// sentinels below; every one of them wraps fielderr.ErrInvalid.
var (
	// ErrInvalidAmount: an amount is negative, NaN, infinite or too large.
	ErrInvalidAmount = fmt.Errorf("%w: invalid amount", fielderr.ErrInvalid)
	// ErrInvalidResourceName: a resource name is empty or longer than MaxNameBytes.
	ErrInvalidResourceName = fmt.Errorf("%w: invalid resource name", fielderr.ErrInvalid)
	// ErrEmptyBundle: a bundle requests no resource with a positive amount.
	ErrEmptyBundle = fmt.Errorf("%w: empty bundle", fielderr.ErrInvalid)
	// ErrFractionalGPUs: a bundle, task or actor asks for more than one GPU but not a
	// whole number (1.5), or a node offers a fraction of a GPU: CUDA_VISIBLE_DEVICES
	// cannot name it, and Ray's raylet never grants it.
	ErrFractionalGPUs = fmt.Errorf("%w: GPU amount above 1 not whole", fielderr.ErrInvalid)
	// ErrUnknownMIGProfile: a resource named like a MIG profile ("nvidia.com/mig-…") that
	// no supported GPU model has (CheckMIGResource).
	ErrUnknownMIGProfile = fmt.Errorf("%w: unknown MIG profile", fielderr.ErrInvalid)
	// ErrInvalidMIGAmount: a bundle asks for a MIG profile with an amount other than 1
	// (CUDA uses only the first MIG device in CUDA_VISIBLE_DEVICES).
	ErrInvalidMIGAmount = fmt.Errorf("%w: MIG amount not 1", fielderr.ErrInvalid)
	// ErrFitsNoBundle: a task or actor asks for more than the bundle it names (or, with
	// bundle index -1, than every bundle of its placement group) will ever hold.
	ErrFitsNoBundle = fmt.Errorf("%w: request fits no bundle", fielderr.ErrInvalid)
	// ErrBundleIndex: a task or actor names a bundle index its placement group lacks.
	ErrBundleIndex = fmt.Errorf("%w: bundle index out of range", fielderr.ErrInvalid)

	// ErrInsufficientResources: Subtract would go below zero.
	ErrInsufficientResources = errors.New("insufficient resources")
)
