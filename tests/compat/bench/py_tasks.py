"""The Python task rates of `make bench-ray`, one script for both backends (Ray's API), as
`ray microbenchmark`'s "single client tasks sync" and "single client tasks async".

Run by tests/compat/bench.py with COMPAT_BACKEND=ray or raygo and RAY_ADDRESS naming the
cluster. Prints one `BENCH-RESULT {json}` line: tasks per second of one driver calling
`get(f.remote())` in a loop (sync), and submitting 1,000 tasks then getting them all (async),
each after a warm-up that starts the workers.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

BACKEND = os.environ.get("COMPAT_BACKEND", "raygo")
ray = importlib.import_module(BACKEND)

SYNC = int(os.environ.get("BENCH_TASKS_SYNC", "1000"))
ASYNC_ROUNDS = int(os.environ.get("BENCH_TASKS_ASYNC_ROUNDS", "5"))
ASYNC_BATCH = 1000
WARMUP = 100


@ray.remote
def small_value() -> bytes:
    return b"ok"


def main() -> None:
    ray.init(namespace="bench", _node_ip_address="127.0.0.1", logging_level="ERROR")
    ray.get([small_value.remote() for _ in range(WARMUP)], timeout=300)
    for _ in range(WARMUP):
        ray.get(small_value.remote(), timeout=60)

    start = time.perf_counter()
    for _ in range(SYNC):
        assert ray.get(small_value.remote(), timeout=60) == b"ok"
    sync_rate = SYNC / (time.perf_counter() - start)
    print(f"{BACKEND}: {sync_rate:.0f} sync tasks per s", file=sys.stderr)

    start = time.perf_counter()
    for _ in range(ASYNC_ROUNDS):
        values = ray.get([small_value.remote() for _ in range(ASYNC_BATCH)], timeout=600)
        assert values == [b"ok"] * ASYNC_BATCH
    async_rate = ASYNC_ROUNDS * ASYNC_BATCH / (time.perf_counter() - start)
    print(f"{BACKEND}: {async_rate:.0f} async tasks per s", file=sys.stderr)
    print("BENCH-RESULT " + json.dumps({"sync_per_s": sync_rate, "async_per_s": async_rate}))
    ray.shutdown()


if __name__ == "__main__":
    main()
