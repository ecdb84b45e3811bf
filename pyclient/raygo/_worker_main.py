"""A Python worker process: what a raylet runs, as ``<interpreter> -m raygo._worker_main``,
for a Python job's worker lease (raylet.proto's ``PythonWorker``).

It serves protos/worker.proto's ``CoreWorkerService`` on ``RAYGO_NODE_IP`` (a free port),
announces the address to its raylet (``RegisterWorker``) and runs the tasks the driver
pushes, one at a time. A task names its function by its key in the GCS's internal KV
(namespace ``fun``), where the driver put it pickled with cloudpickle; the worker fetches
each function once. Arguments come as one pickled ``(args, kwargs)`` tuple, the result goes
back pickled, and an exception goes back as a ``TaskError`` carrying the pickled exception
and its traceback. The environment is the Go workers' (protos/worker.proto): the lease's
``CUDA_VISIBLE_DEVICES``, ``RAYGO_RESOURCES``, its bundle, and the cluster token, which the
worker's server requires and its own calls carry. A task that submits tasks or creates
actors makes the worker join its job at ``RAYGO_GCS_ADDRESS`` (raygo._worker.global_client).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import os
import sys
import threading
import traceback
from typing import Any, Callable, Dict, Optional

import grpc

from raygo import _objects, _worker
from raygo._auth import METADATA_KEY as AUTH_METADATA_KEY
from raygo._auth import load_token, tls_credentials
from raygo._gcs import CHANNEL_OPTIONS, DEFAULT_RPC_TIMEOUT_S, open_channel
from raygo._proto import gcs_pb2, gcs_pb2_grpc, raylet_pb2, raylet_pb2_grpc, worker_pb2, worker_pb2_grpc

FUNCTION_KV_NAMESPACE = "fun"


class _RequireToken(grpc.ServerInterceptor):
    """Refuses calls without the cluster token (its own, or by the SHA-256 its raylet gives
    it in RAYGO_AUTH_TOKEN_SHA256 when its own is a node token), or the token of the tenant
    the raylet leased it to (by its SHA-256, RAYGO_LESSEE_TOKEN_SHA256), as the Go
    workers' servers do."""

    def __init__(self, token: str, *accepted_sha256: str) -> None:
        # With the cluster token's SHA-256, its own token (maybe a node token) is not taken.
        self._expected = "" if not token or (accepted_sha256 and accepted_sha256[0]) else "Bearer " + token
        self._accepted_sha256 = [digest for digest in accepted_sha256 if digest]

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "worker: missing or wrong cluster token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def _is_accepted_by_hash(self, presented: str) -> bool:
        if not presented.startswith("Bearer "):
            return False
        digest = hashlib.sha256(presented[len("Bearer "):].encode()).hexdigest()
        return any(hmac.compare_digest(digest, accepted) for accepted in self._accepted_sha256)

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        metadata = dict(handler_call_details.invocation_metadata or ())
        presented = metadata.get(AUTH_METADATA_KEY) or ""
        if not (self._expected and hmac.compare_digest(presented.encode(), self._expected.encode())) and not self._is_accepted_by_hash(presented):
            return self._deny
        return continuation(handler_call_details)


def _server_credentials() -> Optional[grpc.ServerCredentials]:
    """Mutual TLS for the worker's server when the cluster runs with RAYGO_USE_TLS=1."""
    if tls_credentials() is None:
        return None
    read = lambda name: open(os.environ[name], "rb").read()  # noqa: E731
    return grpc.ssl_server_credentials(
        [(read("RAYGO_TLS_SERVER_KEY"), read("RAYGO_TLS_SERVER_CERT"))],
        root_certificates=read("RAYGO_TLS_CA_CERT"),
        require_client_auth=True,
    )


def _channel(address: str, token: Optional[str]) -> grpc.Channel:
    return open_channel(address, token)[1]


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class CoreWorker(worker_pb2_grpc.CoreWorkerServiceServicer):
    """Runs pushed tasks one at a time; functions are fetched from the GCS once each."""

    def __init__(self, kv: gcs_pb2_grpc.InternalKVServiceStub, kv_as_caller: gcs_pb2_grpc.InternalKVServiceStub) -> None:
        import cloudpickle

        self._pickle = cloudpickle
        self._kv = kv
        # A channel that adds no token: each call carries its caller's (_function).
        self._kv_as_caller = kv_as_caller
        self._functions: Dict[str, Callable[..., Any]] = {}
        self._run_lock = threading.Lock()
        # The actor this worker hosts (CreateActor), if any.
        self._actor_id = ""
        self._actor: Any = None

    def _function(self, key: str, context: grpc.ServicerContext) -> Callable[..., Any]:
        function = self._functions.get(key)
        if function is None:
            # Read with the token the call carried (the driver's, a tenant's own or the
            # cluster token; the GCS sends an actor's class): it reaches that job's
            # functions, where this worker's own token may be a node token, which does not.
            presented = dict(context.invocation_metadata() or ()).get(AUTH_METADATA_KEY)
            kv, metadata = (self._kv_as_caller, [(AUTH_METADATA_KEY, presented)]) if presented else (self._kv, None)
            reply = kv.KVGet(
                gcs_pb2.KVGetRequest(namespace=FUNCTION_KV_NAMESPACE, key=key.encode()),
                timeout=DEFAULT_RPC_TIMEOUT_S, wait_for_ready=True, metadata=metadata,
            )
            if not reply.found:
                raise LookupError(f"function {key} is not in the GCS (its job ended?)")
            function = self._pickle.loads(reply.value)
            self._functions[key] = function
        return function

    def PushTask(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Runs one task, or one method call of the hosted actor."""
        reply = worker_pb2.PushTaskReply(worker_id=_worker.worker_context().worker_id, pid=os.getpid())
        with self._run_lock:
            if request.actor_id != self._actor_id:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              f"worker hosts actor {self._actor_id or 'none'}, not {request.actor_id or 'none'}")
            try:
                if request.actor_id:
                    function = getattr(self._actor, request.function_name)
                else:
                    function = self._function(request.function_name, context)
                args, kwargs = self._pickle.loads(request.args[0]) if request.args else ((), {})
                _worker.worker_context().begin_task(request.task_id, getattr(function, "__name__", "task"),
                                                    request.placement_group_capture_child_tasks if not request.actor_id else None)
                try:
                    result = function(*args, **kwargs)
                finally:
                    _worker.worker_context().end_task()
                reply.returns.append(_objects.pickled_value(self._pickle.dumps(result), _worker.worker_context().job_id))
            except Exception as exc:  # the task's failure goes back to the driver
                reply.error.CopyFrom(self._task_error(exc))
        return reply

    def _task_error(self, exc: BaseException) -> Any:
        try:
            pickled = self._pickle.dumps(exc)
        except Exception:  # an exception that does not pickle still reports its traceback
            pickled = b""
        return worker_pb2.TaskError(
            type=_qualified_name(type(exc)),
            message="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            python_exception=pickled,
        )

    def CreateActor(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Runs a Python actor's constructor; the worker then hosts the actor."""
        reply = worker_pb2.CreateActorOnWorkerReply(pid=os.getpid())
        with self._run_lock:
            if self._actor_id and self._actor_id != request.actor_id:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"worker hosts actor {self._actor_id} already")
            try:
                # The GCS sends the class with auth on: its call carries no token that reads the KV.
                cls = self._pickle.loads(request.python_class) if request.python_class else self._function(request.python_class_key, context)
                args, kwargs = self._pickle.loads(request.constructor_args[0]) if request.constructor_args else ((), {})
                _worker.worker_context().actor_id = request.actor_id
                _worker.worker_context().num_restarts = request.num_restarts
                _worker.worker_context().capture_child_tasks = request.placement_group_capture_child_tasks
                self._actor = cls(*args, **kwargs)
                self._actor_id = request.actor_id
            except Exception as exc:  # the constructor's failure: the GCS buries the actor
                reply.error.CopyFrom(self._task_error(exc))
        return reply


def _notify_blocked(raylet: Any, worker_id: str, blocked: bool) -> None:
    """Tells the raylet the worker waits in get/wait (its CPU may be lent) or runs again.
    A raylet that does not answer changes nothing for the task: it only waits longer."""
    try:
        raylet.NotifyWorkerBlocked(raylet_pb2.NotifyWorkerBlockedRequest(worker_id=worker_id, blocked=blocked),
                                   timeout=DEFAULT_RPC_TIMEOUT_S)
    except grpc.RpcError:
        pass


def main() -> None:
    worker_id = os.environ["RAYGO_WORKER_ID"]
    token = load_token()
    _worker.enter_worker_mode()
    gcs = _channel(os.environ["RAYGO_GCS_ADDRESS"], token)
    accepted = (os.environ.get("RAYGO_AUTH_TOKEN_SHA256", ""), os.environ.get("RAYGO_LESSEE_TOKEN_SHA256", ""),
                os.environ.get("RAYGO_GCS_CREDENTIAL_SHA256", ""))
    # A raylet with auth sets RAYGO_AUTH_TOKEN_SHA256 (maybe empty): a tenant's actor's
    # worker holds no token that others' calls carry, yet requires theirs.
    under_auth = "RAYGO_AUTH_TOKEN_SHA256" in os.environ
    if under_auth and not accepted[0] and not accepted[1] and token:
        accepted = (hashlib.sha256(token.encode()).hexdigest(),) + accepted[1:]  # its raylet's token is the cluster token
    interceptors = [_RequireToken(token or "", *accepted)] if token or under_auth else []
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4), interceptors=interceptors,
                         options=CHANNEL_OPTIONS)
    worker_pb2_grpc.add_CoreWorkerServiceServicer_to_server(CoreWorker(gcs_pb2_grpc.InternalKVServiceStub(gcs),
                                                                  gcs_pb2_grpc.InternalKVServiceStub(_channel(os.environ["RAYGO_GCS_ADDRESS"], None))), server)
    host = os.environ.get("RAYGO_NODE_IP") or "127.0.0.1"
    bind = f"[{host}]:0" if ":" in host else f"{host}:0"
    credentials = _server_credentials()
    port = server.add_insecure_port(bind) if credentials is None else server.add_secure_port(bind, credentials)
    server.start()
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    raylet = raylet_pb2_grpc.NodeManagerServiceStub(_channel(os.environ["RAYGO_RAYLET_ADDRESS"], token))
    raylet.RegisterWorker(
        raylet_pb2.RegisterWorkerRequest(worker_id=worker_id, address=address, pid=os.getpid()),
        timeout=DEFAULT_RPC_TIMEOUT_S, wait_for_ready=True,
    )
    _worker.worker_context().notify_blocked = lambda blocked: _notify_blocked(raylet, worker_id, blocked)
    # The raylet kills the worker when its lease ends for good (and with itself).
    server.wait_for_termination()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
