"""The Python actor-call rates of `make bench-ray`, one script for both backends (Ray's API),
as `ray microbenchmark`'s "1:1 actor calls sync" and "1:1 actor calls async"
(ray/_private/ray_perf.py of Ray 2.60).

Run by tests/compat/bench.py with COMPAT_BACKEND=ray or raygo and RAY_ADDRESS naming the
cluster. One actor with `num_cpus=0`, as Ray's; sync: `get(a.small_value.remote())` in a
loop; async: 1,000 calls submitted, then all gotten, on a fresh actor. Measured as Ray's
`timeit` measures (ray_microbenchmark_helpers.py): one second of warm-up, then four rounds of
at least two seconds, the mean of the four rates (without Ray's 10 s pause before each
figure). Prints one `BENCH-RESULT {json}` line.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Callable

BACKEND = os.environ.get("COMPAT_BACKEND", "raygo")
ray = importlib.import_module(BACKEND)

ROUND_S = float(os.environ.get("BENCH_ACTOR_ROUND_S", "2"))
ASYNC_BATCH = 1000


@ray.remote(num_cpus=0)
class Actor:
    def small_value(self) -> bytes:
        return b"ok"


def timeit(fn: Callable[[], None], multiplier: int = 1) -> float:
    """Ray's microbenchmark timeit: calls of fn per second (times multiplier), mean of 4 rounds."""
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < 1:
        fn()
        count += 1
    step = count // 10 + 1
    rates = []
    for _ in range(4):
        start = time.perf_counter()
        count = 0
        while time.perf_counter() - start < ROUND_S:
            for _ in range(step):
                fn()
            count += step
        rates.append(multiplier * count / (time.perf_counter() - start))
    return sum(rates) / len(rates)


def main() -> None:
    ray.init(namespace="bench", _node_ip_address="127.0.0.1", logging_level="ERROR")

    sync_actor = Actor.remote()
    assert ray.get(sync_actor.small_value.remote(), timeout=300) == b"ok"

    def actor_sync() -> None:
        assert ray.get(sync_actor.small_value.remote(), timeout=60) == b"ok"

    sync_rate = timeit(actor_sync)
    print(f"{BACKEND}: {sync_rate:.0f} sync actor calls per s", file=sys.stderr)

    async_actor = Actor.remote()
    assert ray.get(async_actor.small_value.remote(), timeout=300) == b"ok"

    def actor_async() -> None:
        values = ray.get([async_actor.small_value.remote() for _ in range(ASYNC_BATCH)], timeout=600)
        assert values == [b"ok"] * ASYNC_BATCH

    async_rate = timeit(actor_async, ASYNC_BATCH)
    print(f"{BACKEND}: {async_rate:.0f} async actor calls per s", file=sys.stderr)
    print("BENCH-RESULT " + json.dumps({"actor_sync_per_s": sync_rate, "actor_async_per_s": async_rate}))
    ray.shutdown()


if __name__ == "__main__":
    main()
