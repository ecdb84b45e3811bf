package sdk

import (
	"errors"
	"strings"
	"testing"
)

func TestResourceRequestCountsIdenticalBundles(t *testing.T) {
	constraint, err := clusterResourceConstraint(ResourceRequest{NumCPUs: 3,
		Bundles:              []Bundle{{"GPU": 1, "CPU": 4}, {"CPU": 1}, {"GPU": 1, "CPU": 4}, {"GPU": 1, "CPU": 4}},
		BundleLabelSelectors: []map[string]string{{"zone": "a"}, {}, {"zone": "a"}, nil}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range constraint.ResourceRequests {
		got = append(got, shapeKey(r.Request.ResourcesBundle, r.Request.LabelSelector)+"x"+strings.Repeat("I", int(r.Count)))
	}
	want := []string{
		shapeKey(Bundle{"CPU": 1}, nil) + "xIIII", // num_cpus=3 and the {"CPU": 1} bundle
		shapeKey(Bundle{"GPU": 1, "CPU": 4}, map[string]string{"zone": "a"}) + "xII",
		shapeKey(Bundle{"GPU": 1, "CPU": 4}, nil) + "xI",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("shapes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if empty, err := clusterResourceConstraint(ResourceRequest{}); err != nil || len(empty.ResourceRequests) != 0 {
		t.Fatalf("a zero request clears: %v, %v", empty, err)
	}
}

func TestResourceRequestRefusalsNameTheArgument(t *testing.T) {
	for field, req := range map[string]ResourceRequest{
		"num_cpus":               {NumCPUs: -1},
		"bundle_label_selectors": {Bundles: []Bundle{{"CPU": 1}}, BundleLabelSelectors: []map[string]string{{}, {}}},
	} {
		_, err := clusterResourceConstraint(req)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: %v, want ErrInvalidArgument naming it", field, err)
		}
	}
}
