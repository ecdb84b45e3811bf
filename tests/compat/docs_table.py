"""Ray docs, "Observe and Debug Placement Groups" (the placement_group_table part): every
group listed with Ray's keys and states."""

from compat_lib import (RAY_TABLE_KEYS, connect, finish, placement_group, placement_group_table, record,
                        remove_placement_group, ray, wait_until)

connect("compat-docs-table")
created = placement_group([{"CPU": 1}], name="table-created")
pending = placement_group([{"CPU": 64}], name="table-pending")
ray.get(created.ready(), timeout=30)
table = placement_group_table()
record("listed", [k in table for k in (created.id.hex(), pending.id.hex())])
record("keys", sorted(RAY_TABLE_KEYS & set(table[created.id.hex()])))
record("states", [table[created.id.hex()]["state"], table[pending.id.hex()]["state"]])
record("names", [table[created.id.hex()]["name"], table[pending.id.hex()]["name"]])
record("pending_verdict", wait_until("INFEASIBLE", lambda: placement_group_table(pending)["stats"]["scheduling_state"] == "INFEASIBLE"))
record("pending_nodes", placement_group_table(pending)["bundles_to_node_id"])
for pg in (created, pending):
    remove_placement_group(pg)
record("removed_listed", wait_until("REMOVED", lambda: placement_group_table()[pending.id.hex()]["state"] == "REMOVED"))
finish()
