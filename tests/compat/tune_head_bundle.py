"""Shaped like Ray Tune's PlacementGroupFactory with an empty head bundle ([{}, {"CPU": 1},
{"CPU": 1}]): Tune leaves the empty bundle out before creating the group, and raygo must
refuse what Ray refuses when it is not left out."""

from compat_lib import connect, finish, outcome, placement_group, placement_group_table, record, remove_placement_group, ray

connect("compat-tune-head")
bundles = [{}, {"CPU": 1}, {"CPU": 1}]
outcome("empty_head_bundle_refused", lambda: placement_group(bundles, strategy="PACK"))
head_bundle_is_empty = not bundles[0]
pg = placement_group(bundles[1:] if head_bundle_is_empty else bundles, strategy="PACK")
ray.get(pg.ready(), timeout=30)
record("bundles", placement_group_table(pg)["bundles"])
record("bundle_count", pg.bundle_count)
remove_placement_group(pg)
# A bundle of zeros only, as a misconfigured factory gives.
outcome("zero_bundle_refused", lambda: placement_group([{"CPU": 0}], strategy="PACK"))
finish()
