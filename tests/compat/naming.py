"""Named groups: lookup, uniqueness, namespaces, and detached groups outliving their driver."""

from compat_lib import (
    connect, finish, get_placement_group, outcome, placement_group, placement_group_table, record,
    remove_placement_group, run_driver, wait_until, PlacementGroup, ray,
)

NAMESPACE = "compat-naming"
connect(NAMESPACE)

pg = placement_group([{"CPU": 1}], name="compat-named")
ray.get(pg.ready(), timeout=60)
found = get_placement_group("compat-named")
record("lookup_finds_it", found == pg and found.id.hex() == pg.id.hex())
record("lookup_bundle_specs", found.bundle_specs)
record("table_name", placement_group_table(found)["name"])
outcome("taken_name", lambda: placement_group([{"CPU": 1}], name="compat-named"))
outcome("unknown_name", lambda: get_placement_group("compat-nobody"))
outcome("empty_name", lambda: get_placement_group(""))
remove_placement_group(pg)
outcome("removed_name", lambda: get_placement_group("compat-named"))
again = placement_group([{"CPU": 1}], name="compat-named")
record("name_reusable", get_placement_group("compat-named") == again)
remove_placement_group(again)

# Another driver in another namespace does not see the name; one in the same namespace does.
detached_then_mortal = run_driver(f"""
    from compat_lib import connect, ray, placement_group
    connect({NAMESPACE!r})
    detached = placement_group([{{"CPU": 1}}], name="compat-detached", lifetime="detached")
    mortal = placement_group([{{"CPU": 1}}], name="compat-mortal")
    ray.get([detached.ready(), mortal.ready()], timeout=60)
    print(detached.id.hex(), mortal.id.hex())
    ray.shutdown()
""").split()
record("driver_ran", len(detached_then_mortal) == 2)
if len(detached_then_mortal) == 2:
    detached_id, mortal_id = detached_then_mortal
    mortal = PlacementGroup(ray.PlacementGroupID(bytes.fromhex(mortal_id)))
    record("mortal_removed_with_its_driver",
           wait_until("the mortal group to go", lambda: placement_group_table(mortal).get("state") == "REMOVED"))
    outcome("mortal_name_gone", lambda: get_placement_group("compat-mortal"))
    detached = get_placement_group("compat-detached")
    record("detached_survives", detached.id.hex() == detached_id)
    record("detached_state", placement_group_table(detached)["state"])
    other = run_driver("""
        from compat_lib import connect, ray, get_placement_group
        connect("compat-elsewhere")
        try:
            get_placement_group("compat-detached")
            print("found")
        except ValueError:
            print("not-found")
        ray.shutdown()
    """).strip()
    record("other_namespace_lookup", other)
    remove_placement_group(detached)
    # Wait: a detached group whose removal is lost (a driver exiting at once) would hold its CPU.
    record("detached_removed", wait_until("the detached group to go",
                                          lambda: placement_group_table(detached)["state"] == "REMOVED"))

finish()
