"""Arguments of the wrong type: the errors Ray raises (TypeError where Ray's own code or its
C++ layer raises it)."""

from compat_lib import PlacementGroupSchedulingStrategy, connect, finish, get_placement_group, outcome, placement_group, ray

connect("compat-wrong-types")
pg = placement_group([{"CPU": 1}])
ray.get(pg.ready(), timeout=30)
cases = {
    "name_int": lambda: placement_group([{"CPU": 1}], name=3),
    "strategy_int": lambda: placement_group([{"CPU": 1}], strategy=3),
    "lifetime_int": lambda: placement_group([{"CPU": 1}], lifetime=3),
    "get_placement_group_int": lambda: get_placement_group(3),
    "get_placement_group_empty": lambda: get_placement_group(""),
    "wait_str": lambda: pg.wait("1"),
    "ray_wait_num_returns_str": lambda: ray.wait([pg.ready()], num_returns="1"),
    "ray_wait_num_returns_zero": lambda: ray.wait([pg.ready()], num_returns=0),
    "ray_get_dict": lambda: ray.get({"a": pg.ready()}),
    "ray_get_list_of_int": lambda: ray.get([pg.ready(), 3]),
    "ray_wait_tuple": lambda: ray.wait((pg.ready(),)),
    "remove_str": lambda: ray.util.remove_placement_group("pg"),
    "table_str": lambda: ray.util.placement_group_table("pg"),
    "bundle_float_ok": lambda: placement_group([{"CPU": 1.5}]).wait(10),
    "init_address_int": lambda: ray.init(address=3),
}
for name, call in cases.items():
    outcome(name, call, normalize=lambda value: {"returned": value if isinstance(value, bool) else "value"})
outcome("strategy_index_str", lambda: PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0),
        normalize=lambda s: s.placement_group_bundle_index)
finish()
