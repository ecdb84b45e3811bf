package resources

import (
	"fmt"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
	"github.com/raygo-dev/raygo/internal/mig"
)

// AnyBundle is the bundle index that lets a task or actor use any bundle of its
// placement group (Ray's placement_group_bundle_index=-1).
const AnyBundle = -1

// CheckFitsBundle tells whether a task or actor request can ever run inside a placement
// group whose bundles hold bundles[i]: inside bundle index, or inside at least one bundle
// when index is AnyBundle. It checks totals, not what other tasks hold now. Errors wrap
// ErrBundleIndex or ErrFitsNoBundle and name the bundle (field placement_group_bundle_index).
func CheckFitsBundle(placementGroupID string, bundles []Set, index int, request Set) error {
	const field = "placement_group_bundle_index"
	if index < AnyBundle || index >= len(bundles) {
		return fielderr.New(ErrBundleIndex, field, "placement group %s has bundles 0..%d, got %d (-1 means any bundle)",
			placementGroupID, len(bundles)-1, index)
	}
	if index != AnyBundle {
		if !request.IsSubsetOf(bundles[index]) {
			return fielderr.New(ErrFitsNoBundle, field, "bundle %d of placement group %s holds %s; the request asks %s",
				index, placementGroupID, bundles[index], request)
		}
		return nil
	}
	held := make([]string, len(bundles))
	for i, bundle := range bundles {
		if request.IsSubsetOf(bundle) {
			return nil
		}
		held[i] = fmt.Sprintf("bundle %d %s", i, bundle)
	}
	return fielderr.New(ErrFitsNoBundle, field, "no bundle of placement group %s fits the request %s (%s)",
		placementGroupID, request, strings.Join(held, ", "))
}

// ParseBundle converts one wire bundle of a placement group and checks it with Ray's
// rules (CheckBundle). Errors name the resource (`["GPU"]: ...`) or, for a rule of the
// whole bundle, no field; callers prefix the bundle (`bundles[2]`).
func ParseBundle(wire map[string]float64) (Set, error) {
	bundle, err := SetFromFloat(wire)
	if err != nil {
		return nil, err
	}
	if err := CheckBundle(bundle); err != nil {
		return nil, err
	}
	return bundle, nil
}

// CheckBundle applies the rules of a placement-group bundle beyond CheckSet: GPU
// amounts above one are whole, MIG profiles exist with amount 1, at most one MIG
// profile, and at least one positive amount.
func CheckBundle(bundle Set) error {
	if err := checkGPUAmount(bundle); err != nil {
		return err
	}
	// Schedule runs this on every bundle: names are sorted (to report the first problem
	// deterministically) only when a bundle asks for MIG profiles.
	migDevices := 0
	for name := range bundle {
		if mig.IsResource(name) {
			migDevices = -1
			break
		}
	}
	if migDevices < 0 {
		migDevices = 0
		for _, name := range bundle.Names() {
			if err := CheckMIGResource(name, bundle[name]); err != nil {
				return err
			}
			if mig.IsResource(name) && bundle[name] > 0 {
				migDevices++
			}
		}
	}
	if migDevices > 1 {
		return fielderr.New(ErrInvalidMIGAmount, "",
			"a bundle gets at most one MIG device (CUDA uses only the first), got %d MIG profiles", migDevices)
	}
	for _, amount := range bundle {
		if amount > 0 {
			return nil
		}
	}
	return fielderr.New(ErrEmptyBundle, "", "a bundle must request at least one resource with a positive amount")
}

// ParseTaskResources converts what a task or an actor asks to hold while it runs: the
// amounts of SetFromFloat, and GPU amounts above one whole, as Ray's. Errors name the
// resource (`["GPU"]: ...`); callers prefix the field (`resources`).
func ParseTaskResources(wire map[string]float64) (Set, error) {
	set, err := SetFromFloat(wire)
	if err != nil {
		return nil, err
	}
	if err := checkGPUAmount(set); err != nil {
		return nil, err
	}
	return set, nil
}

// ParseNodeResources converts what a node offers: the amounts of SetFromFloat, and
// whole GPUs. Errors name the resource (`["GPU"]: ...`).
func ParseNodeResources(wire map[string]float64) (Set, error) {
	set, err := SetFromFloat(wire)
	if err != nil {
		return nil, err
	}
	if gpus := set[GPU]; gpus%AmountScale != 0 {
		return nil, fielderr.New(ErrFractionalGPUs, Field(GPU), "a node offers whole GPUs, got %s", gpus)
	}
	return set, nil
}

// checkGPUAmount: a fraction of one GPU, or whole GPUs.
func checkGPUAmount(set Set) error {
	if gpus := set[GPU]; gpus > AmountScale && gpus%AmountScale != 0 {
		return fielderr.New(ErrFractionalGPUs, Field(GPU),
			"GPU amounts above 1 must be whole numbers (a fraction of one GPU, or whole GPUs), got %s", gpus)
	}
	return nil
}

// CheckMIGResource checks one resource of a bundle: nil unless the name is a MIG
// profile's. A MIG profile must be one that a supported model has (else
// ErrUnknownMIGProfile, naming every model's profiles), and its amount must be 1, or 0
// for none (else ErrInvalidMIGAmount): a bundle gets at most one MIG device. The error
// is a *fielderr.Error whose field is the resource, `["nvidia.com/mig-3g.99gb"]`, for the
// caller to prefix with the bundle (`bundles[0]["nvidia.com/mig-3g.99gb"]: no
// supported GPU model has this MIG profile (A100-40GB has 1g.5gb, …; …)`).
func CheckMIGResource(resource string, amount Amount) error {
	if !mig.IsResource(resource) {
		return nil
	}
	name, _ := mig.ProfileName(resource)
	models := mig.ModelsWithProfile(name)
	if len(models) == 0 {
		return fielderr.New(ErrUnknownMIGProfile, Field(resource),
			"no supported GPU model has this MIG profile (%s)", mig.DescribeModels())
	}
	if amount != 0 && amount != AmountScale {
		return fielderr.New(ErrInvalidMIGAmount, Field(resource),
			"a bundle gets at most one MIG device (CUDA uses only the first): amount must be 1, got %s (MIG profile %s of %s)",
			amount, name, mig.JoinModels(models))
	}
	return nil
}
