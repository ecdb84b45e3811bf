package store_test

import (
	"testing"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/gcs/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func TestMemoryName(t *testing.T) {
	if got := store.NewMemory().Name(); got != "memory" {
		t.Errorf("Name() = %q; want memory", got)
	}
}
