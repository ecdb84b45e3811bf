package pending

import "testing"

func TestReasonsAreDistinctAndValid(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range All {
		if seen[r] {
			t.Fatalf("%s listed twice", r)
		}
		seen[r] = true
		if !r.Valid() {
			t.Fatalf("%s not valid", r)
		}
	}
	if Reason("NotAReason").Valid() {
		t.Fatal("unknown reason reported valid")
	}
	if !QuotaExceeded.HeldByAdmission() || NoResources.HeldByAdmission() {
		t.Fatal("HeldByAdmission: quota is admission's, NoResources is placement's")
	}
}
