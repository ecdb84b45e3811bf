"""Bad input: the errors Ray raises (Ray's own checks only: raygo is stricter on amounts)."""

from compat_lib import (
    connect, finish, outcome, record, wait_until, placement_group, ray, PlacementGroupSchedulingStrategy,
)

connect("compat-validation")
cases = {
    "bundles_not_a_list": lambda: placement_group({"CPU": 1}),
    "no_bundles": lambda: placement_group([]),
    "empty_bundle": lambda: placement_group([{}]),
    "all_zero": lambda: placement_group([{"CPU": 0}]),
    "string_amount": lambda: placement_group([{"CPU": "1"}]),
    "bad_strategy": lambda: placement_group([{"CPU": 1}], strategy="PACKED"),
    "bad_lifetime": lambda: placement_group([{"CPU": 1}], lifetime="forever"),
    "selector_count": lambda: placement_group([{"CPU": 1}], bundle_label_selector=[{}, {}]),
    "selector_value_type": lambda: placement_group([{"CPU": 1}], bundle_label_selector=[{"zone": 1}]),
    "get_not_a_ref": lambda: ray.get(3),
    "get_list_of_not_refs": lambda: ray.get([3]),
    "reinit": lambda: ray.init(address="auto"),
}
for name, call in cases.items():
    outcome(name, call)

pg = placement_group([{"CPU": 1}, {"CPU": 1}])
ref = pg.ready()
outcome("wait_not_a_list", lambda: ray.wait(ref))
outcome("wait_duplicates", lambda: ray.wait([ref, ref], timeout=0))
outcome("wait_too_many", lambda: ray.wait([ref], num_returns=2))
outcome("wait_negative_timeout", lambda: ray.wait([ref], timeout=-1))
outcome("strategy_valid_index", lambda: PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=1),
        normalize=lambda s: [s.placement_group_bundle_index, s.placement_group_capture_child_tasks])
outcome("strategy_defaults", lambda: PlacementGroupSchedulingStrategy(pg),
        normalize=lambda s: [s.placement_group_bundle_index, s.placement_group_capture_child_tasks])
outcome("reinit_ignored", lambda: ray.init(address="auto", ignore_reinit_error=True))
ray.util.remove_placement_group(pg)
record("removed", wait_until("removal", lambda: ray.util.placement_group_table(pg)["state"] == "REMOVED"))
finish()
