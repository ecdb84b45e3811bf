"""Ray docs, "Label selectors for placement groups": per-bundle selectors with values,
in(), ! and !in()."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, ray

connect("compat-docs-labels")
zone_of = {n["NodeID"]: n["Labels"].get("zone") for n in ray.nodes() if n["Alive"]}
cases = {
    "value": [{"zone": "b"}],
    "in": [{"zone": "in(a,b)"}],
    "not": [{"zone": "!c"}, {"zone": "!c"}],
    "not_in": [{"zone": "!in(a,b)"}, {"zone": "!in(a,b)"}],
}
for name, selectors in cases.items():
    pg = placement_group([{"CPU": 1}] * len(selectors), strategy="STRICT_SPREAD", bundle_label_selector=selectors)
    ray.get(pg.ready(), timeout=30)
    row = placement_group_table(pg)
    zones = sorted(zone_of[row["bundles_to_node_id"][i]] for i in range(len(selectors)))
    # in(a,b) with one bundle may take either zone; the others leave one choice.
    record(name, zones[0] in ("a", "b") if name == "in" else zones)
    ray.util.remove_placement_group(pg)
# A selector no node matches waits.
pg = placement_group([{"CPU": 1}], bundle_label_selector=[{"zone": "mars"}])
record("unmatched_wait", pg.wait(2))
record("unmatched_state", placement_group_table(pg)["state"])
ray.util.remove_placement_group(pg)
finish()
