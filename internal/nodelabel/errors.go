package nodelabel

import (
	"fmt"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// ErrInvalidSelector: a label selector's key or value is malformed, or a key appears
// twice. It wraps fielderr.ErrInvalid.
var ErrInvalidSelector = fmt.Errorf("%w: invalid label selector", fielderr.ErrInvalid)
