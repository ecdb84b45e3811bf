"""The connection to a raygo GCS: gRPC channel and stubs, the protocol-version handshake,
the job (driver) lease, and the translation of gRPC errors into Ray's exception types.

Everything that touches the network lives here; the public modules (``raygo``,
``raygo.util.placement_group``) validate input and shape results.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple

import grpc

from raygo._proto import (
    autoscaler_pb2,
    autoscaler_pb2_grpc,
    gcs_pb2,
    gcs_pb2_grpc,
    placement_group_pb2,
    placement_group_pb2_grpc,
)
from raygo._auth import METADATA_KEY as AUTH_METADATA_KEY
from raygo._auth import load_token, tls_credentials
from raygo._version import PROTOCOL_METADATA_KEY, PROTOCOL_VERSION
from raygo.exceptions import (
    AuthenticationError,
    PlacementGroupNameConflictError,
    RaySystemError,
    TaskPlacementGroupRemoved,
)

logger = logging.getLogger("raygo")

# How long an ordinary call may wait for the GCS (including reconnecting to it) before it
# fails with ConnectionError. Long enough to ride out a GCS restart under its supervisor.
DEFAULT_RPC_TIMEOUT_S = 30.0
# How long MarkJobFinished may take at shutdown: a driver exiting should not hang on a
# GCS that is gone (its lease then expires on its own).
SHUTDOWN_RPC_TIMEOUT_S = 5.0
# Pause before a ready-wait that lost its connection is sent again.
READY_RETRY_DELAY_S = 0.2
# Creates and removes sent without waiting go on the client's sender threads (blocking
# calls) while at most this many are in flight, and as gRPC futures beyond: a future
# starts a thread whenever no other is in flight, which costs more than a call, but in a
# burst one thread serves them all, and futures sent from the caller's thread leave in the
# order asked for.
ASYNC_SENDERS = 2
# A removal through the creating handle waits at most this long for the driver's next
# create, which carries it to the GCS in the same call; then it is sent on its own.
REMOVAL_RIDE_S = 0.005
# How long a create sent on the caller's thread lets the GCS wait for the group's first
# attempt: a group that fits is ready when the answer comes; one that takes longer is
# waited for by ready() / wait().
INLINE_FIRST_ATTEMPT_MS = 200
# A lease renewal that failed is sent again after this pause, doubling per failure up to a
# third of the lease: a renewal lost to a stalled or restarting GCS gets other chances
# before the lease runs out, not one more a third of the lease later.
LEASE_RETRY_MIN_S = 0.1


def lease_renewal_plan(last_renewed: float, now: float, failures: int, lease_s: float) -> Tuple[float, float]:
    """When to send the job's next lease renewal and how long it may take, as
    ``(wait_s, timeout_s)``.

    ``last_renewed`` is when the last renewal the GCS accepted was sent (registering counts
    as one): the lease holds until ``last_renewed + lease_s`` at least. Renewals go every
    third of the lease; after ``failures`` failed ones in a row, the next goes after
    LEASE_RETRY_MIN_S doubled per failure (at most a third of the lease). A renewal may
    take until the lease would run out, and at least a third of the lease once it has
    (the GCS then answers whether it ended the job).
    """
    every = lease_s / 3
    if failures == 0:
        wait = last_renewed + every - now
    else:
        wait = min(LEASE_RETRY_MIN_S * 2 ** (failures - 1), every)
    wait = max(wait, 0.0)
    timeout = max(last_renewed + lease_s - (now + wait), every)
    return wait, timeout


def call_metadata(token: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """The metadata every call to a raygo server carries: the protocol version, and the
    cluster token when there is one."""
    metadata: Tuple[Tuple[str, str], ...] = ((PROTOCOL_METADATA_KEY, str(PROTOCOL_VERSION)),)
    if token:
        metadata += ((AUTH_METADATA_KEY, "Bearer " + token),)
    return metadata


class _VersionInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Adds call_metadata(token) to the metadata of every call."""

    def __init__(self, token: Optional[str]) -> None:
        self._metadata = call_metadata(token)

    def intercept_unary_unary(self, continuation: Callable, client_call_details: Any, request: Any) -> Any:
        metadata = list(client_call_details.metadata or [])
        metadata.extend(self._metadata)
        details = _CallDetails(
            client_call_details.method,
            client_call_details.timeout,
            metadata,
            client_call_details.credentials,
            client_call_details.wait_for_ready,
            client_call_details.compression,
        )
        return continuation(details, request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):  # type: ignore[no-untyped-def]
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def _driver_ip(gcs_host: str) -> str:
    """The local address this machine uses to reach the GCS (what Ray records as the driver IP)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((gcs_host, 1))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


# Options of every channel and server of the client and its workers: flow-control windows
# stay fixed, as the raygo servers' and clients' are (rpcutil's StreamWindowBytes), so no
# bandwidth-probing PING follows the data of each call, which cost a write and a wake-up
# on both sides of every call.
CHANNEL_OPTIONS = (("grpc.http2.bdp_probe", 0),)


def open_channel(address: str, token: Optional[str]) -> Tuple[grpc.Channel, grpc.Channel]:
    """A channel to a raygo server at address (mutual TLS when the cluster runs with
    RAYGO_USE_TLS=1), and the same channel carrying the protocol version and token on
    every call: (raw, with token). Close the raw one."""
    credentials = tls_credentials()
    raw = (
        grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        if credentials is None
        else grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
    )
    return raw, grpc.intercept_channel(raw, _VersionInterceptor(token))


class GcsClient:
    """One connection to a GCS, registered as one job whose lease a daemon thread renews.

    Safe for concurrent use: gRPC stubs are thread-safe and the mutable state (the closing
    flag, the renewal thread, the creates and removes in flight) is guarded by locks.

    Creates and removes may be sent without waiting (``create_placement_group_async``,
    ``remove_placement_group_async``); every synchronous call waits for the ones in flight
    first, so a driver's later calls see what it asked for before.
    """

    def __init__(self, address: str, namespace: str, connect_timeout_s: float, job_id: Optional[str] = None) -> None:
        """Registers a new job in namespace; with job_id, joins that running job instead
        (a worker submitting nested tasks: the job's namespace is read from the GCS, and
        its driver, not this connection, renews and ends it)."""
        self.address = address
        self._joined = job_id is not None
        host = address.rsplit(":", 1)[0].strip("[]")
        token = load_token()  # before the channel: a bad token file is a ValueError naming it
        self._channel, channel = open_channel(address, token)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout_s)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise ConnectionError(
                f"no raygo GCS answers at {address} (waited {connect_timeout_s:g} s); "
                "start a cluster with `raygo start --head` or pass its address to raygo.init"
            ) from None
        self._nodes = gcs_pb2_grpc.NodeInfoServiceStub(channel)
        self._jobs = gcs_pb2_grpc.JobInfoServiceStub(channel)
        self._pgs = placement_group_pb2_grpc.PlacementGroupServiceStub(channel)
        # The create, on the raw channel with the interceptor's metadata given per call:
        # a driver making one group at a time makes one call per group, and the
        # interceptor's Python layer costs about a quarter of a bare call.
        self._create_pg = placement_group_pb2_grpc.PlacementGroupServiceStub(self._channel).CreatePlacementGroup
        self._metadata = call_metadata(token)
        self._autoscaler = autoscaler_pb2_grpc.AutoscalerStateServiceStub(channel)
        # What Ray records as the driver's node IP: the address this machine reaches the GCS from.
        self.driver_ip = _driver_ip(host)
        self._lock = threading.Lock()
        self._closed = False
        # Numbers the creates in the order they are asked for: the GCS registers them so.
        self._create_seq = itertools.count(1)
        # Creates and removes sent without waiting and not answered yet.
        self._in_flight_lock = threading.Lock()
        self._in_flight: Set["concurrent.futures.Future[Any]"] = set()
        # Removals not sent yet (group id, when asked), under _in_flight_lock: the next
        # create carries them, or the removal thread sends them after REMOVAL_RIDE_S.
        self._removals: List[Tuple[str, float]] = []
        self._removals_changed = threading.Condition(self._in_flight_lock)
        self._removal_thread: Optional[threading.Thread] = None
        # Whether the removal thread waits for a first removal (a later one finds it
        # waiting for an earlier one's time, and need not wake it).
        self._removal_thread_idle = False
        # The last create sent without waiting, and whether the driver waited for its
        # group since (ready(), wait()): a driver that waits for each group before making
        # the next gets its next create sent on its own thread (no hand-over to a sender
        # thread), while creates made in a burst go through the senders and overlap.
        self._last_create: "Optional[concurrent.futures.Future[Any]]" = None
        self._last_create_waited = True
        # Sends them (see ASYNC_SENDERS); threads to spare for retries, which sleep first.
        self._senders = concurrent.futures.ThreadPoolExecutor(2 * ASYNC_SENDERS, thread_name_prefix="raygo-send")
        self._stop_renewal = threading.Event()
        self._renewal: Optional[threading.Thread] = None
        try:
            self.cluster_info = self._handshake()
            # The job's lease runs from its registration (for the lease, when it was sent).
            self._registered_at = time.monotonic()
            if job_id is None:
                reply = self.call(
                    "register the driver",
                    self._jobs.AddJob,
                    gcs_pb2.AddJobRequest(
                        namespace=namespace,
                        driver_ip=self.driver_ip,
                        driver_pid=os.getpid(),
                        entrypoint=" ".join(sys.argv) or "python",
                    ),
                )
                job_id, namespace, lease_timeout_ms = reply.job.job_id, reply.job.namespace, reply.lease_timeout_ms
            else:
                namespace, lease_timeout_ms = self._job_namespace(job_id), 0
        except BaseException:
            self._channel.close()
            raise
        self.job_id: str = job_id
        self.namespace: str = namespace
        self.lease_timeout_s = max(lease_timeout_ms / 1000.0, 0.3)
        if not self._joined:
            self._renewal = threading.Thread(
                target=self._renew_lease, name=f"raygo-job-{self.job_id}-lease", daemon=True
            )
            self._renewal.start()

    def _job_namespace(self, job_id: str) -> str:
        jobs = self.call("read the job", self._jobs.GetAllJobInfo, gcs_pb2.GetAllJobInfoRequest()).jobs
        for job in jobs:
            if job.job_id == job_id:
                return str(job.namespace)
        raise RaySystemError(f"job {job_id} is not known to the GCS at {self.address}")

    # --- connection and errors -------------------------------------------------------

    def _handshake(self) -> "gcs_pb2.GetClusterInfoReply":
        """Asks who the GCS is and refuses a server that speaks another protocol version."""
        try:
            reply, call = self._nodes.GetClusterInfo.with_call(
                gcs_pb2.GetClusterInfoRequest(), timeout=DEFAULT_RPC_TIMEOUT_S, wait_for_ready=True
            )
        except grpc.RpcError as err:
            raise self.translate(err, "connect") from None
        header = dict(call.initial_metadata() or ())
        server_version = header.get(PROTOCOL_METADATA_KEY, str(reply.protocol_version))
        if server_version != str(PROTOCOL_VERSION) or reply.protocol_version != PROTOCOL_VERSION:
            raise RaySystemError(
                f"protocol version mismatch: client speaks raygo protocol {PROTOCOL_VERSION}, "
                f"server at {self.address} speaks {server_version}"
            )
        return reply

    def store_emptied_note(self) -> Optional[str]:
        """Says so when the GCS restarted on its memory store since this driver connected:
        the store started empty, so this driver's job, groups and actors are gone. None
        otherwise (or when the GCS does not answer).
        """
        if self.cluster_info.store != "memory":
            return None
        try:
            now = self._nodes.GetClusterInfo(gcs_pb2.GetClusterInfoRequest(), timeout=2.0)
        except grpc.RpcError:
            return None
        if now.start_time_ms == self.cluster_info.start_time_ms:
            return None
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now.start_time_ms / 1000))
        return (
            f"the GCS at {self.address} restarted at {started} UTC on its memory store, which starts empty: "
            f"job {self.job_id} and its placement groups and actors are gone. "
            "Call raygo.shutdown() and raygo.init() to start again."
        )

    def translate(self, err: BaseException, what: str) -> Exception:
        """Turns a gRPC error into the exception Ray would raise, keeping the server's message."""
        code, details = rpc_status(err)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            if details.startswith("name:") and "already exists" in details:
                return PlacementGroupNameConflictError(details)
            return ValueError(details)
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return ConnectionError(f"{what}: no raygo GCS answered at {self.address}: {details}")
        if code == grpc.StatusCode.CANCELLED and self._closed:
            return RaySystemError(f"{what}: raygo.shutdown() closed the connection to {self.address}")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return AuthenticationError(f"{what}: GCS at {self.address}: {details}")
        if code == grpc.StatusCode.FAILED_PRECONDITION and details.startswith("protocol version"):
            return RaySystemError(f"{what}: GCS at {self.address}: {details}")
        name = code.name if code is not None else "UNKNOWN"
        return RaySystemError(f"{what}: GCS at {self.address} answered {name}: {details}")

    def call(self, what: str, method: Callable, request: Any, timeout: float = DEFAULT_RPC_TIMEOUT_S) -> Any:
        """Makes one unary call, after the creates and removes in flight are answered;
        waits for a reconnecting GCS up to timeout.
        """
        self.flush(timeout)
        try:
            return method(request, timeout=timeout, wait_for_ready=True)
        except grpc.RpcError as err:
            raise self.translate(err, what) from None

    # --- the job lease -----------------------------------------------------------------

    def _renew_lease(self) -> None:
        """Renews the job's lease every third of its timeout until close(), sooner again
        after a failed renewal (lease_renewal_plan)."""
        renewed, failures = self._registered_at, 0
        warned = False
        while True:
            wait, timeout = lease_renewal_plan(renewed, time.monotonic(), failures, self.lease_timeout_s)
            if self._stop_renewal.wait(wait):
                return
            sent = time.monotonic()
            try:
                self._jobs.RenewJobLease(
                    gcs_pb2.RenewJobLeaseRequest(job_id=self.job_id), timeout=timeout, wait_for_ready=True
                )
                renewed, failures = sent, 0
                warned = False
            except grpc.RpcError as err:
                failures += 1
                if self._stop_renewal.is_set():
                    return
                code, details = rpc_status(err)
                if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                    emptied = self.store_emptied_note()
                    if emptied:
                        logger.error("raygo: %s", emptied)
                        return
                    logger.error(
                        "raygo: the GCS at %s ended job %s (%s); its non-detached placement groups "
                        "were removed. Call raygo.shutdown() and raygo.init() to start a new job.",
                        self.address, self.job_id, details,
                    )
                    return
                if not warned:
                    logger.warning("raygo: could not renew the lease of job %s at %s: %s; retrying",
                                   self.job_id, self.address, details)
                    warned = True

    def close(self) -> None:
        """Waits for the creates and removes in flight, marks the job finished (its
        non-detached groups are removed; not for a joined job) and closes the channel."""
        self.flush(SHUTDOWN_RPC_TIMEOUT_S)
        with self._lock:
            if self._closed:
                return
            self._stop_renewal.set()
            with self._removals_changed:
                self._removals_changed.notify_all()
            try:
                if not self._joined:  # a joined job is its driver's to end
                    self._jobs.MarkJobFinished(
                        gcs_pb2.MarkJobFinishedRequest(job_id=self.job_id), timeout=SHUTDOWN_RPC_TIMEOUT_S
                    )
            except grpc.RpcError as err:
                logger.warning("raygo: could not mark job %s finished at %s (%s); its lease will expire",
                               self.job_id, self.address, rpc_status(err)[1])
            self._closed = True
            self._channel.close()
        self._senders.shutdown(wait=False)

    @property
    def closed(self) -> bool:
        return self._closed

    # --- nodes -------------------------------------------------------------------------

    def all_nodes(self) -> Sequence[Any]:
        return self.call("list nodes", self._nodes.GetAllNodeInfo, gcs_pb2.GetAllNodeInfoRequest()).nodes

    def driver_node(self) -> Optional[Any]:
        """The ALIVE node this driver runs on, as Ray picks it: one with the driver's IP,
        the head first; None when no node has it (a driver on a machine without a node).
        """
        from raygo._proto import common_pb2

        here = [n for n in self.all_nodes() if n.state == common_pb2.ALIVE and n.node_ip == self.driver_ip]
        here.sort(key=lambda n: (not n.is_head_node, n.start_time_ms, n.node_id))
        return here[0] if here else None

    # --- actors ------------------------------------------------------------------------

    def request_cluster_resource_constraint(self, constraint: "autoscaler_pb2.ClusterResourceConstraint") -> None:
        """Replaces the cluster's request_resources constraint (an empty one clears it)."""
        self.call(
            "request resources",
            self._autoscaler.RequestClusterResourceConstraint,
            autoscaler_pb2.RequestClusterResourceConstraintRequest(cluster_resource_constraint=constraint),
        )

    def cluster_resource_state(self) -> Any:
        """The cluster as the autoscaler sees it (ClusterResourceState)."""
        return self.call(
            "read the cluster resource state",
            self._autoscaler.GetClusterResourceState,
            autoscaler_pb2.GetClusterResourceStateRequest(),
        ).cluster_resource_state

    # --- placement groups --------------------------------------------------------------

    def create_placement_group(self, request: "placement_group_pb2.CreatePlacementGroupRequest") -> Any:
        request.namespace = self.namespace
        request.creator_job_id = self.job_id
        request.client_seq = next(self._create_seq)
        reply = self.call("create placement group", self._pgs.CreatePlacementGroup, request)
        return self._created_row(request, reply)

    def create_placement_group_async(
        self, request: "placement_group_pb2.CreatePlacementGroupRequest"
    ) -> "concurrent.futures.Future[Any]":
        """Sends the create without waiting: a future of the group's row as the GCS
        answered it (or of the error, as ``create_placement_group`` would raise it). The
        request must carry the group's id, so that a create sent again after a lost
        connection answers the same group.
        """
        request.namespace = self.namespace
        request.creator_job_id = self.job_id
        # Sent alongside others, it may reach the GCS before the ones asked for earlier:
        # the number keeps the groups queued in the order asked for.
        request.client_seq = next(self._create_seq)
        with self._in_flight_lock:
            # A driver that waited for its last group and has nothing in flight creates
            # one group at a time: the create goes on this thread, carrying the removals
            # not sent yet.
            inline = self._last_create_waited and not self._in_flight
            if inline:
                request.remove_placement_group_ids.extend(pg_id for pg_id, _ in self._removals)
                self._removals.clear()
                request.wait_first_attempt_ms = min(request.wait_first_attempt_ms, INLINE_FIRST_ATTEMPT_MS)
        result = _AsyncCall(
            self, "create placement group", self._create_pg, request,
            lambda reply: self._created_row(request, reply), self._why_refused, inline=inline,
            metadata=self._metadata,
        ).result
        if request.remove_placement_group_ids and result.exception() is not None:
            # The removals it carried may not have been applied: send them on their own.
            for pg_id in request.remove_placement_group_ids:
                self.remove_placement_group_async(pg_id)
        self._last_create, self._last_create_waited = result, False
        return result

    def note_waited(self, create: "Optional[concurrent.futures.Future[Any]]") -> None:
        """The driver waits (ready(), wait()) for the group whose create this was."""
        if create is not None and create is self._last_create:
            self._last_create_waited = True

    def _why_refused(self, err: Exception) -> Exception:
        """A create's refusal, or the reason behind it: a GCS restarted on its empty memory
        store no longer knows this driver's job."""
        emptied = None if self._closed else self.store_emptied_note()
        return RaySystemError(emptied) if emptied else err

    def _created_row(self, request: Any, reply: Any) -> Any:
        """The row a create answered, checked to be the group asked for."""
        if request.placement_group_id and reply.placement_group.placement_group_id != request.placement_group_id:
            raise RaySystemError(
                f"create placement group: the GCS at {self.address} answered group "
                f"{reply.placement_group.placement_group_id}, not {request.placement_group_id}: it does not take "
                "client-chosen ids (an older raygo); upgrade it"
            )
        return reply.placement_group

    def remove_placement_group(self, pg_id: str) -> None:
        self.call(
            f"remove placement group {pg_id}",
            self._pgs.RemovePlacementGroup,
            placement_group_pb2.RemovePlacementGroupRequest(placement_group_id=pg_id),
        )

    def remove_placement_group_later(self, pg_id: str) -> None:
        """Removes a group whose create was answered. A removal alone (none waiting, nothing
        in flight: a driver making one group at a time) needs no call of its own: the
        driver's next create carries it, or it is sent after REMOVAL_RIDE_S (and before any
        other call of this client). One of several in a row is sent at once, with those
        waiting. An error is logged, as a Ray driver's removal reports none.
        """
        with self._removals_changed:
            alone = not self._removals and not self._in_flight
            if alone:
                self._removals.append((pg_id, time.monotonic()))
                if self._removal_thread is None:
                    self._removal_thread = threading.Thread(
                        target=self._send_removals_late, name=f"raygo-job-{self.job_id}-removals", daemon=True
                    )
                    self._removal_thread.start()
                elif self._removal_thread_idle:
                    self._removal_thread_idle = False
                    self._removals_changed.notify()
        if not alone:
            self._send_removals()
            self.remove_placement_group_async(pg_id)

    def _send_removals_late(self) -> None:
        """The removal thread: sends each removal no create took within REMOVAL_RIDE_S."""
        with self._removals_changed:
            while not self._closed:
                if not self._removals:
                    self._removal_thread_idle = True
                    self._removals_changed.wait()
                    continue
                due = self._removals[0][1] + REMOVAL_RIDE_S - time.monotonic()
                if due > 0:
                    self._removals_changed.wait(due)
                    continue
                late = [pg_id for pg_id, _ in self._removals]
                self._removals.clear()
                self._removals_changed.release()
                try:
                    for pg_id in late:
                        self.remove_placement_group_async(pg_id)
                finally:
                    self._removals_changed.acquire()

    def _send_removals(self) -> None:
        """Sends the removals no create took yet (before a call that must see them)."""
        with self._in_flight_lock:
            pending = [pg_id for pg_id, _ in self._removals]
            self._removals.clear()
        for pg_id in pending:
            self.remove_placement_group_async(pg_id)

    def remove_placement_group_async(
        self, pg_id: str, after: "Optional[concurrent.futures.Future[Any]]" = None
    ) -> "concurrent.futures.Future[Any]":
        """Sends the removal without waiting (after ``after``, the group's create, when it
        is still in flight); an error is logged, as a Ray driver's removal reports none.
        """
        what = f"remove placement group {pg_id}"
        removal = _AsyncCall(
            self, what, self._pgs.RemovePlacementGroup,
            placement_group_pb2.RemovePlacementGroupRequest(placement_group_id=pg_id), lambda r: None, after=after,
        ).result
        removal.add_done_callback(_log_failure)
        return removal

    # --- calls in flight ---------------------------------------------------------------

    def _track(self, future: "concurrent.futures.Future[Any]") -> None:
        with self._in_flight_lock:
            self._in_flight.add(future)
        future.add_done_callback(self._untrack)

    def _untrack(self, future: "concurrent.futures.Future[Any]") -> None:
        with self._in_flight_lock:
            self._in_flight.discard(future)

    def in_flight(self) -> int:
        """How many creates and removes sent without waiting are not answered yet."""
        return len(self._in_flight)

    def flush(self, timeout: Optional[float] = DEFAULT_RPC_TIMEOUT_S) -> None:
        """Waits (up to timeout) until the creates and removes asked for so far are
        answered (sending the removals no create took)."""
        self._send_removals()
        with self._in_flight_lock:
            pending = list(self._in_flight)
        if pending:
            concurrent.futures.wait(pending, timeout=timeout)

    def _after_in_flight(self, fn: Callable[[], None]) -> None:
        """Calls fn once the creates and removes asked for so far are answered (at once
        when none is in flight)."""
        self._send_removals()
        with self._in_flight_lock:
            pending = list(self._in_flight)
        if not pending:
            fn()
            return
        left = [len(pending)]
        lock = threading.Lock()

        def one_done(_: Any) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                fn()

        for future in pending:
            future.add_done_callback(one_done)

    def get_placement_group(self, pg_id: str) -> Optional[Any]:
        reply = self.call(
            f"get placement group {pg_id}",
            self._pgs.GetPlacementGroup,
            placement_group_pb2.GetPlacementGroupRequest(placement_group_id=pg_id),
        )
        return reply.placement_group if reply.HasField("placement_group") else None

    def get_named_placement_group(self, name: str) -> Optional[Any]:
        reply = self.call(
            f"get placement group named {name!r}",
            self._pgs.GetNamedPlacementGroup,
            placement_group_pb2.GetNamedPlacementGroupRequest(name=name, namespace=self.namespace),
        )
        return reply.placement_group if reply.HasField("placement_group") else None

    def all_placement_groups(self) -> Sequence[Any]:
        return self.call(
            "list placement groups", self._pgs.GetAllPlacementGroup, placement_group_pb2.GetAllPlacementGroupRequest()
        ).placement_groups

    def wait_placement_group(self, pg_id: str, timeout_s: float) -> Tuple[str, Optional[Any]]:
        """Waits up to timeout_s for the group to be CREATED.

        Returns ("created", info), ("timeout", None), ("removed", None) or ("unknown", None).
        """
        deadline = time.monotonic() + max(timeout_s, 0.0)
        self.flush(max(timeout_s, 0.0))
        try:
            reply = self._pgs.WaitPlacementGroupUntilReady(
                placement_group_pb2.WaitPlacementGroupUntilReadyRequest(placement_group_id=pg_id),
                timeout=max(timeout_s, 0.0),
                wait_for_ready=True,
            )
        except grpc.RpcError as err:
            code, details = rpc_status(err)
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return "timeout", None
            # At the deadline the GCS may reset the stream before the client's own deadline
            # fires: the call then ends CANCELLED, which is the same time-out.
            if code == grpc.StatusCode.CANCELLED and not self._closed and time.monotonic() >= deadline - 0.1:
                return "timeout", None
            if code == grpc.StatusCode.FAILED_PRECONDITION and not details.startswith("protocol"):
                return "removed", None
            if code == grpc.StatusCode.NOT_FOUND:
                return "unknown", None
            raise self.translate(err, f"wait for placement group {pg_id}") from None
        return "created", reply.placement_group

    def wait_preemption_notice(self, pg_id: str, wait_s: float) -> Tuple[str, Optional[Any]]:
        """Long-polls up to wait_s for the group's preemption notice.

        Returns ("notice", notice), ("none", None) when none came, ("gone", None) when the
        group is removed or unknown (nothing more will come).
        """
        try:
            reply = self._pgs.WaitPreemptionNotice(
                placement_group_pb2.WaitPreemptionNoticeRequest(placement_group_id=pg_id, wait_ms=int(wait_s * 1000)),
                timeout=wait_s + 10,
                wait_for_ready=True,
            )
        except grpc.RpcError as err:
            code, details = rpc_status(err)
            if code == grpc.StatusCode.NOT_FOUND or (
                code == grpc.StatusCode.FAILED_PRECONDITION and not details.startswith("protocol")
            ):
                return "gone", None
            raise self.translate(err, f"wait for a preemption notice of placement group {pg_id}") from None
        return ("notice", reply.notice) if reply.HasField("notice") else ("none", None)

    def ack_preemption_notice(self, pg_id: str, time_ms: int) -> None:
        self.call(
            f"acknowledge the preemption notice of placement group {pg_id}",
            self._pgs.AckPreemptionNotice,
            placement_group_pb2.AckPreemptionNoticeRequest(placement_group_id=pg_id, time_ms=time_ms),
        )

    def ready_future(
        self, pg_id: str, value: Any, created: "Optional[concurrent.futures.Future[Any]]" = None
    ) -> "concurrent.futures.Future[Any]":
        """A future that resolves to value once the group is CREATED.

        It fails with TaskPlacementGroupRemoved if the group is removed first, and with
        RaySystemError for an unknown group or when the client shuts down. A wait cut by a
        lost connection (a GCS restart) is sent again. ``created`` is the group's create
        when it is in flight: its answer settles the future when it says CREATED (or the
        create failed); the long poll, when needed, starts after it. Without one, the long
        poll starts once the creates and removes in flight are answered.
        """
        waiter = _ReadyWaiter(self, pg_id, value)
        if created is None:
            self._after_in_flight(waiter.start)
        else:
            created.add_done_callback(waiter.on_created)
        return waiter.result


def _log_failure(future: "concurrent.futures.Future[Any]") -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("raygo: %s", future.exception())


class _AsyncCall:
    """One unary call sent without blocking the caller (after ``after`` settles, when
    given; or, ``inline``, made on the caller's thread before the constructor returns),
    settled into a concurrent Future with ``answer(reply)`` or the translated error.
    A call cut by a lost connection is sent again until its deadline: creates (by their
    client-chosen id) and removes are idempotent. The client flushes it before its other
    calls.
    """

    def __init__(
        self, client: GcsClient, what: str, method: Any, request: Any, answer: Callable[[Any], Any],
        explain: Callable[[Exception], Exception] = lambda err: err,
        after: "Optional[concurrent.futures.Future[Any]]" = None, inline: bool = False,
        metadata: Optional[Tuple[Tuple[str, str], ...]] = None,
    ) -> None:
        self._client = client
        # The call's metadata, for a method of the raw channel (None: the method adds it).
        self._metadata = metadata
        self._explain = explain
        self._what = what
        self._method = method
        self._request = request
        self._answer = answer
        self._deadline = time.monotonic() + DEFAULT_RPC_TIMEOUT_S
        self.result: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        client._track(self.result)
        if inline:
            self._run()  # on the caller's thread: settled when the constructor returns
        elif after is None or after.done():
            self._send()
        else:
            after.add_done_callback(lambda _: self._send())

    def _send(self) -> None:
        if self._client.in_flight() > ASYNC_SENDERS:
            self._send_future()
            return
        try:
            self._client._senders.submit(self._run)
        except RuntimeError:  # shut down
            self._settle(error=self._client.translate(_Cancelled(), self._what))

    def _send_future(self) -> None:
        if self._client.closed:
            self._settle(error=self._client.translate(_Cancelled(), self._what))
            return
        try:
            call = self._method.future(
                self._request, timeout=max(self._deadline - time.monotonic(), 0.0), metadata=self._metadata,
                wait_for_ready=True,
            )
        except ValueError:  # the channel was closed under us
            self._settle(error=self._client.translate(_Cancelled(), self._what))
            return
        call.add_done_callback(self._on_future_done)

    def _on_future_done(self, call: grpc.Future) -> None:
        err = _Cancelled() if call.cancelled() else call.exception()
        if err is None:
            self._answered(call.result())
        elif not self._retry(err):
            self._settle(error=self._client.translate(err, self._what))
        else:
            # On a sender thread: it sleeps before sending again.
            self._send_on_sender()

    def _send_on_sender(self) -> None:
        try:
            self._client._senders.submit(self._run, True)
        except RuntimeError:  # shut down
            self._settle(error=self._client.translate(_Cancelled(), self._what))

    def _retry(self, err: BaseException) -> bool:
        """Whether a call that failed with err is sent again: a lost connection, while
        the deadline allows."""
        code, _ = rpc_status(err)
        return (
            code == grpc.StatusCode.UNAVAILABLE
            and not self._client.closed
            and time.monotonic() + READY_RETRY_DELAY_S < self._deadline
        )

    def _answered(self, reply: Any) -> None:
        try:
            self._settle(value=self._answer(reply))
        except Exception as answer_err:  # noqa: BLE001 (an unreadable reply fails the call)
            self._settle(error=answer_err)

    def _run(self, pause: bool = False) -> None:
        if pause:
            time.sleep(READY_RETRY_DELAY_S)
        while True:
            if self._client.closed:
                self._settle(error=self._client.translate(_Cancelled(), self._what))
                return
            try:
                reply = self._method(
                    self._request, timeout=max(self._deadline - time.monotonic(), 0.0), metadata=self._metadata,
                    wait_for_ready=True,
                )
            except ValueError:  # the channel was closed under us
                self._settle(error=self._client.translate(_Cancelled(), self._what))
                return
            except grpc.RpcError as err:
                if self._retry(err):
                    time.sleep(READY_RETRY_DELAY_S)
                    continue
                self._settle(error=self._client.translate(err, self._what))
                return
            self._answered(reply)
            return

    def _settle(self, value: Any = None, error: Optional[Exception] = None) -> None:
        if error is not None:
            self.result.set_exception(self._explain(error))
        else:
            self.result.set_result(value)


class _ReadyWaiter:
    """Drives one long-poll WaitPlacementGroupUntilReady call into a concurrent Future."""

    def __init__(self, client: GcsClient, pg_id: str, value: Any) -> None:
        self._client = client
        self._pg_id = pg_id
        self._value = value
        self._call: Optional[grpc.Future] = None
        self.result: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        self.result.add_done_callback(self._on_result_done)

    def start(self) -> None:
        """Sends the long poll."""
        self._start()

    def on_created(self, create: "concurrent.futures.Future[Any]") -> None:
        """The group's create was answered: settles the future, or starts the long poll."""
        if self.result.done():
            return
        err = create.exception()
        if err is not None:
            self._settle(error=err)
            return
        state = create.result().state
        if state == placement_group_pb2.PlacementGroupState.CREATED:
            self._settle(value=self._value)
        elif state == placement_group_pb2.PlacementGroupState.REMOVED:
            self._settle(error=TaskPlacementGroupRemoved(f"placement group {self._pg_id} was removed"))
        else:
            self._start()

    def _start(self) -> None:
        if self.result.done() or self._client.closed:
            self._settle(error=self._client.translate(_Cancelled(), f"wait for placement group {self._pg_id}"))
            return
        try:
            call = self._client._pgs.WaitPlacementGroupUntilReady.future(
                placement_group_pb2.WaitPlacementGroupUntilReadyRequest(placement_group_id=self._pg_id),
                wait_for_ready=True,
            )
        except ValueError:  # the channel was closed under us
            self._settle(error=self._client.translate(_Cancelled(), f"wait for placement group {self._pg_id}"))
            return
        self._call = call
        call.add_done_callback(self._on_call_done)

    def _on_call_done(self, call: grpc.Future) -> None:
        if self.result.done():
            return
        if call.cancelled():
            self._settle(error=self._client.translate(_Cancelled(), f"wait for placement group {self._pg_id}"))
            return
        err = call.exception()
        if err is None:
            self._settle(value=self._value)
            return
        code, details = rpc_status(err)
        if code == grpc.StatusCode.FAILED_PRECONDITION and not details.startswith("protocol"):
            self._settle(error=TaskPlacementGroupRemoved(f"placement group {self._pg_id} was removed"))
        elif code == grpc.StatusCode.NOT_FOUND:
            emptied = self._client.store_emptied_note()
            self._settle(error=RaySystemError(emptied or f"Placement group {self._pg_id} does not exist."))
        elif code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not self._client.closed:
            retry = threading.Timer(READY_RETRY_DELAY_S, self._start)
            retry.daemon = True
            retry.start()
        else:
            self._settle(error=self._client.translate(err, f"wait for placement group {self._pg_id}"))

    def _settle(self, value: Any = None, error: Optional[BaseException] = None) -> None:
        try:
            if error is not None:
                self.result.set_exception(error)
            else:
                self.result.set_result(value)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled or settled meanwhile

    def _on_result_done(self, result: "concurrent.futures.Future[Any]") -> None:
        # The caller dropped or cancelled the reference: stop the long poll on the GCS too.
        if result.cancelled() and self._call is not None:
            self._call.cancel()


class _Cancelled(grpc.RpcError):
    """Stands for a call that the client's own shutdown cancelled."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED

    def details(self) -> str:
        return "cancelled"


def rpc_status(err: BaseException) -> Tuple[Optional[grpc.StatusCode], str]:
    """The status code and message of a failed call (None and str(err) for other errors)."""
    code = getattr(err, "code", None)
    details = getattr(err, "details", None)
    return (code() if callable(code) else None), ((details() if callable(details) else None) or str(err))


def parse_address(address: str) -> str:
    """Checks a HOST:PORT address (IPv6 hosts in brackets) and returns it."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address {address!r}: must be HOST:PORT, e.g. 127.0.0.1:6380")
    return address


def nonnegative_timeout(timeout: Optional[float], name: str = "timeout") -> Optional[float]:
    """Checks a timeout argument in seconds: None (wait forever) or a number >= 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"The '{name}' argument must be a number of seconds or None. Received {timeout!r}")
    if timeout != timeout:
        raise ValueError(f"The '{name}' argument must be a number of seconds or None. Received {timeout!r}")
    if timeout < 0:
        raise ValueError(f"The '{name}' argument must be nonnegative. Received {timeout}")
    return float(timeout)


__all__: List[str] = ["GcsClient", "parse_address", "nonnegative_timeout", "rpc_status"]
