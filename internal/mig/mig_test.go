package mig_test

import (
	"slices"
	"testing"

	"github.com/raygo-dev/raygo/internal/mig"
)

func TestMIGModelOfDevice(t *testing.T) {
	cases := map[string]mig.Model{
		"NVIDIA A100-SXM4-40GB":   mig.A100_40GB,
		"NVIDIA A100-PCIE-40GB":   mig.A100_40GB,
		"A100-SXM4-40GB":          mig.A100_40GB, // drivers before R470 had no "NVIDIA "
		"NVIDIA A100-SXM4-80GB":   mig.A100_80GB,
		"NVIDIA A100 80GB PCIe":   mig.A100_80GB,
		"NVIDIA H100 80GB HBM3":   mig.H100_80GB,
		"NVIDIA H100 PCIe":        mig.H100_80GB,
		"NVIDIA H200":             mig.H200_141GB,
		"NVIDIA H200 141GB HBM3e": mig.H200_141GB,
		"NVIDIA H100 NVL":         "", // 94 GB: 1g.12gb profiles
		"NVIDIA H200 NVL":         "",
		"NVIDIA GH200 480GB":      "",
		"NVIDIA A100 PCIe":        "", // 40 or 80 GB: the name does not say
		"NVIDIA GB200":            "",
		"Tesla V100-SXM2-32GB":    "",
		"":                        "",
	}
	for name, want := range cases {
		got, ok := mig.ModelOfDevice(name)
		if got != want || ok != (want != "") {
			t.Errorf("mig.ModelOfDevice(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestMIGProfileResolvesPerModel(t *testing.T) {
	a100, ok := mig.A100_40GB.ResolveResource("nvidia.com/mig-1g.10gb")
	if !ok || a100.MemorySlices != 2 || a100.ID != 15 || a100.ComputeSlices != 1 {
		t.Errorf("1g.10gb on A100-40GB = %+v, %v; want the 2-slice profile 15", a100, ok)
	}
	h100, ok := mig.H100_80GB.ResolveResource("nvidia.com/mig-1g.10gb")
	if !ok || h100.MemorySlices != 1 || h100.ID != 19 {
		t.Errorf("1g.10gb on H100-80GB = %+v, %v; want the 1-slice profile 19", h100, ok)
	}
	if _, ok := mig.H200_141GB.ResolveResource("nvidia.com/mig-1g.10gb"); ok {
		t.Error("H200-141GB resolved 1g.10gb")
	}
	for _, resource := range []string{"nvidia.com/mig-1g.10gb+me", "nvidia.com/mig-1g.10gb.me"} {
		if me, ok := mig.H100_80GB.ResolveResource(resource); !ok || me.ID != 20 || !me.MediaExtensions {
			t.Errorf("%s on H100-80GB = %+v, %v", resource, me, ok)
		}
	}
	for _, resource := range []string{"GPU", "nvidia.com/mig-", "nvidia.com/gpu", "1g.10gb"} {
		if _, ok := mig.ProfileName(resource); ok {
			t.Errorf("mig.ProfileName(%q) accepted it", resource)
		}
	}
	for profile, want := range map[string][]mig.Model{
		"1g.10gb":                {mig.A100_40GB, mig.A100_80GB, mig.H100_80GB},
		"nvidia.com/mig-1g.18gb": {mig.H200_141GB},
		"3g.40gb":                {mig.A100_80GB, mig.H100_80GB},
		"3g.99gb":                nil,
	} {
		if got := mig.ModelsWithProfile(profile); !slices.Equal(got, want) {
			t.Errorf("mig.ModelsWithProfile(%q) = %v, want %v", profile, got, want)
		}
	}
}
