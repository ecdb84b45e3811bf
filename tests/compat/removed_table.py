"""What a removed group's row and a handle found by name show: Ray keeps the last node ids
of a removed group, and reads a named handle's bundles from the table (zeros left out)."""

from compat_lib import (PlacementGroup, connect, finish, get_placement_group, placement_group, placement_group_table,
                        record, remove_placement_group, ray, wait_until)

connect("compat-removed-table")
pg = placement_group([{"CPU": 1, "GPU": 0}, {"CPU": 2}], strategy="STRICT_SPREAD", name="zeros")
ray.get(pg.ready(), timeout=30)
record("specs_as_requested", pg.bundle_specs)
named = get_placement_group("zeros")
record("named_specs", named.bundle_specs)
record("named_count", named.bundle_count)
by_id = PlacementGroup(pg.id)
record("by_id_specs", by_id.bundle_specs)
placed = placement_group_table(pg)["bundles_to_node_id"]
remove_placement_group(pg)
wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED")
row = placement_group_table(pg)
record("removed_keeps_node_ids", row["bundles_to_node_id"] == placed)
record("removed_bundles", row["bundles"])
record("removed_name", row["name"])
finish()
