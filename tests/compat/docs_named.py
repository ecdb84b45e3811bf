"""Ray docs, "Named Placement Group": create with a name, get it from another driver in the
same namespace, and not from another namespace."""

from compat_lib import (connect, finish, get_placement_group, outcome, placement_group, record,
                        remove_placement_group, ray, run_driver)

connect("compat-docs-named")
pg = placement_group([{"CPU": 1}], name="global_name")
ray.get(pg.ready())
# Retrieve the placement group later somewhere.
found = get_placement_group("global_name")
record("same_group", found == pg)
record("found_ready", ray.get(found.ready(), timeout=10) == pg)
other = run_driver("""
    from compat_lib import connect, get_placement_group, ray
    connect("compat-docs-named")
    print("same-namespace", get_placement_group("global_name").id.hex())
    ray.shutdown()
    connect("compat-docs-named-elsewhere")
    try:
        get_placement_group("global_name")
        print("elsewhere found")
    except ValueError:
        print("elsewhere ValueError")
""")
record("other_driver_same_namespace", f"same-namespace {pg.id.hex()}" in other)
record("other_namespace", "elsewhere ValueError" in other)
remove_placement_group(pg)
outcome("lookup_after_removal", lambda: get_placement_group("global_name"))
finish()
