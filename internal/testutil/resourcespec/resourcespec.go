// Package resourcespec parses the short resource specs tests write ("GPU=1 CPU=8") into
// resource sets: the one parser the scheduler's and the vocabulary's tests share.
package resourcespec

import (
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/resources"
)

// Parse parses "GPU=1 CPU=8" into a set; it panics on a malformed spec (a bug in the test).
func Parse(spec string) resources.Set {
	wire := map[string]float64{}
	for _, field := range strings.Fields(spec) {
		name, value, ok := strings.Cut(field, "=")
		amount, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			panic("bad resource spec " + spec)
		}
		wire[name] = amount
	}
	set, err := resources.SetFromFloat(wire)
	if err != nil {
		panic(err)
	}
	return set
}
