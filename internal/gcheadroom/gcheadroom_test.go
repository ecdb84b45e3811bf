package gcheadroom

import (
	"context"
	"runtime/debug"
	"testing"
)

func TestPercentLetsASmallHeapGrowFourTimesItsSizeAtMostTheHeadroomThenGoesBackToGosDefault(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 64 * mib, maxPercent},    // nothing live yet
		{1024, 64 * mib, maxPercent}, // small: at most four times its size
		{4 * mib, 64 * mib, maxPercent},
		{16 * mib, 64 * mib, 400},  // collect at 16 + 64 MiB
		{32 * mib, 64 * mib, 200},  // at 32 + 64 MiB
		{64 * mib, 64 * mib, 100},  // Go's default from the headroom's size on
		{645 * mib, 64 * mib, 100}, // a large heap never grows more than Go lets it
		{3 * mib, 0, 100},          // no headroom: Go's default
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

func TestKeepRaisesTheGCPercentOfASmallHeapUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("GOGC", "")
	Keep(ctx, DefaultHeadroom)
	if got := debug.SetGCPercent(100); got <= 100 {
		t.Fatalf("GC percent %d after Keep on a test's small heap, want more than Go's default 100", got)
	}
	t.Setenv("GOGC", "100")
	Keep(ctx, DefaultHeadroom)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d after Keep with GOGC set, want it left alone (100)", got)
	}
}
