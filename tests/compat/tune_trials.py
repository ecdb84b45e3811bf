"""Shaped like Ray Tune: one group per trial from PlacementGroupFactory([{"CPU": 1},
{"CPU": 1}]) with PACK, more trials than the cluster holds; finished trials' groups are
removed and waiting ones start. Tune polls readiness with ray.wait(timeout=0)."""

from compat_lib import connect, finish, placement_group, placement_group_table, record, remove_placement_group, ray, wait_until

connect("compat-tune")
fit = int(ray.available_resources().get("CPU", 0)) // 2  # 8 trials on 16 free CPUs
trials = [placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK") for _ in range(fit + 2)]


def ready_count():
    ready, _ = ray.wait([pg.ready() for pg in trials], num_returns=len(trials), timeout=0)
    return len(ready)


record("as_many_run_as_fit", wait_until("the trials that fit placed", lambda: ready_count() == fit))
record("states", [sum(placement_group_table(pg)["state"] == state for pg in trials) - (fit if state == "CREATED" else 2)
                  for state in ("CREATED", "PENDING")])
waiting = next(pg for pg in trials if placement_group_table(pg)["state"] == "PENDING")
finished = next(pg for pg in trials if placement_group_table(pg)["state"] == "CREATED")
remove_placement_group(finished)
record("waiting_trial_starts", ray.get(waiting.ready(), timeout=30) == waiting)
record("bundle_specs", waiting.bundle_specs)
for pg in trials:
    remove_placement_group(pg)
finish()
