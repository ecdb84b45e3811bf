"""Ray docs, "Placement Group Lifetimes": a detached group outlives the driver that made it;
a non-detached one does not."""

from compat_lib import (PlacementGroup, connect, finish, get_placement_group, placement_group_table, record,
                        remove_placement_group, ray, run_driver, wait_until)

connect("compat-docs-detached")
out = run_driver("""
    from compat_lib import connect, placement_group, ray
    connect("compat-docs-detached")
    pg = placement_group([{"CPU": 1}], lifetime="detached", name="detached-pg")
    ray.get(pg.ready())
    mortal = placement_group([{"CPU": 1}], name="mortal-pg")
    ray.get(mortal.ready())
    print("created", mortal.id.hex())
""")
record("driver_ran", "created" in out)
pg = get_placement_group("detached-pg")
record("detached_alive", placement_group_table(pg)["state"])
mortal_id = out.split()[-1] if "created" in out else ""
mortal = PlacementGroup(ray.PlacementGroupID.from_hex(mortal_id))
record("mortal_removed", wait_until("the dead driver's group removed",
                                     lambda: placement_group_table(mortal).get("state") == "REMOVED", timeout=60))
remove_placement_group(pg)
record("detached_removed", wait_until("REMOVED", lambda: placement_group_table(pg)["state"] == "REMOVED"))
finish()
