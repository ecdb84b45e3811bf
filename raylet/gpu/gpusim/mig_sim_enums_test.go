package gpusim

import (
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
)

// Every profile of every table is reachable through an NVML profile enum.
func TestSimProfileEnumsCoverPlacementTables(t *testing.T) {
	ids := map[int]bool{}
	for _, id := range simProfileEnums {
		ids[id] = true
	}
	for _, model := range mig.Models() {
		for _, profile := range model.Profiles() {
			if !ids[profile.ID] {
				t.Errorf("%s: no NVML profile enum answers profile id %d (%s)", model, profile.ID, profile.Name)
			}
		}
	}
}
