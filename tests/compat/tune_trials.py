"""Shaped like Ray Tune: one group per trial from PlacementGroupFactory([{"CPU": 1},
{"CPU": 1}]) with PACK, more trials than the cluster holds; finished trials' groups are
removed and waiting ones start. Tune polls readiness with ray.wait(timeout=0)."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, remove_placement_group, ray, wait_until

connect("compat-tune")
trials = [placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK") for _ in range(10)]  # 20 CPUs on 16


def ready_count():
    ready, _ = ray.wait([pg.ready() for pg in trials], num_returns=len(trials), timeout=0)
    return len(ready)


record("eight_run", wait_until("eight trials placed", lambda: ready_count() == 8))
record("states", sorted(placement_group_table(pg)["state"] for pg in trials))
waiting = next(pg for pg in trials if placement_group_table(pg)["state"] == "PENDING")
finished = next(pg for pg in trials if placement_group_table(pg)["state"] == "CREATED")
remove_placement_group(finished)
record("waiting_trial_starts", ray.get(waiting.ready(), timeout=30) == waiting)
record("bundle_specs", waiting.bundle_specs)
for pg in trials:
    remove_placement_group(pg)
finish()
