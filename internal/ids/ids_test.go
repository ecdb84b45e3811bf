package ids

import (
	"encoding/hex"
	"testing"
)

func TestRandomIsHexOfTheSizeAndDiffers(t *testing.T) {
	a, b := Random(28), Random(28)
	if len(a) != 56 || a == b {
		t.Fatalf("Random(28) = %q, %q: want two different 56-character ids", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil {
		t.Fatalf("Random(28) = %q is not hex: %v", a, err)
	}
}
