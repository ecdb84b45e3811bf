"""Waiting on refs in a worker lends the worker's CPU, as in Ray: a task (or actor method)
blocked in ``get`` / ``wait`` on results not there yet tells its raylet
(``NodeManagerService.NotifyWorkerBlocked``), which lets other leases of its bundle or node
use the lease's CPU meanwhile, so the children it waits for can run even when it holds
the last CPU; when the wait ends the worker takes the CPU back. In a driver it is a plain
wait.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Optional, Sequence, Set, Tuple

from raygo import _worker


def wait_futures(futures: Sequence["concurrent.futures.Future[Any]"], timeout: Optional[float] = None,
                 return_when: str = concurrent.futures.ALL_COMPLETED) -> Tuple[Set[Any], Set[Any]]:
    """``concurrent.futures.wait``, with the worker marked blocked while it waits."""
    if not _worker.is_worker() or all(future.done() for future in futures) or timeout == 0:
        return concurrent.futures.wait(futures, timeout=timeout, return_when=return_when)
    with _worker.worker_context().blocked():
        return concurrent.futures.wait(futures, timeout=timeout, return_when=return_when)
