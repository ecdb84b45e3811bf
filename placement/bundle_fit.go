package placement

import (
	"fmt"
	"strings"
)

// AnyBundle is the bundle index that lets a task or actor use any bundle of its
// placement group (Ray's placement_group_bundle_index=-1).
const AnyBundle = -1

// CheckFitsBundle tells whether a task or actor request can ever run inside a placement
// group whose bundles hold bundles[i]: inside bundle index, or inside at least one bundle
// when index is AnyBundle. It checks totals, not what other tasks hold now. Errors wrap
// ErrBundleIndex or ErrFitsNoBundle and name the bundle (field placement_group_bundle_index).
func CheckFitsBundle(placementGroupID string, bundles []ResourceSet, index int, request ResourceSet) error {
	const field = "placement_group_bundle_index"
	if index < AnyBundle || index >= len(bundles) {
		return fieldErrorf(ErrBundleIndex, field, "placement group %s has bundles 0..%d, got %d (-1 means any bundle)",
			placementGroupID, len(bundles)-1, index)
	}
	if index != AnyBundle {
		if !request.IsSubsetOf(bundles[index]) {
			return fieldErrorf(ErrFitsNoBundle, field, "bundle %d of placement group %s holds %s; the request asks %s",
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
	return fieldErrorf(ErrFitsNoBundle, field, "no bundle of placement group %s fits the request %s (%s)",
		placementGroupID, request, strings.Join(held, ", "))
}
