package nodelabel

import (
	"fmt"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// ErrInvalidSelector: a label selector's key or value is malformed, or a key appears
// twice. It wraps fielderr.ErrInvalid.
var ErrInvalidSelector = fmt.Errorf("%w: invalid label selector", fielderr.ErrInvalid)

// ErrInvalidLabel: a node's label key or value is malformed. It wraps fielderr.ErrInvalid.
var ErrInvalidLabel = fmt.Errorf("%w: invalid node label", fielderr.ErrInvalid)
