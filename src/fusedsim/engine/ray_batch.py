"""``fusedsim batch --engine ray``: score pairs on every GPU (or on CPU actors) of a Ray cluster.

One long-lived actor per GPU (``num_gpus=1``; Ray makes its GPU ``cuda:0`` inside the actor) holds a
:class:`~fusedsim.engine.Scorer` with warm metrics and its prepared reference, and runs the same
:mod:`fusedsim.engine.batch_pairs` code as the local path (decoding threads, reference reuse by pixel hash, the
Scorer's OOM ladder, a failing pair as a row with its error). Without GPUs (or with ``device="cpu"``) it starts
``workers`` CPU actors (default: the cluster's CPUs).

Work is sent in chunks of pairs sharing one reference, at most two chunks in flight per actor, and a free actor
takes the next chunk of the reference it holds when there is one; results come back chunk by chunk and the driver
writes them to the same incremental output as the local path. Image paths must be readable by every node (a
shared file system). Ray is an optional extra: ``pip install 'fusedsim[ray]'``.

A cluster address is probed first (:func:`check_address`: one TCP connection, a few seconds at most): Ray's own
connection attempt retries for 20-odd seconds and ends in a traceback that does not name the address.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from fusedsim.engine.batch_pairs import PairOutcome, PairRunner, PairTask, decode_ahead, plan

__all__ = ["ADDRESS_TIMEOUT_S", "RayBatch", "check_address", "chunk_by_reference"]

ADDRESS_TIMEOUT_S = 5.0  # a cluster head that does not accept a connection in this time is reported unreachable
_RAY_CLIENT_PORT = 10001  # the default port of ``ray://`` addresses
_NOT_PROBED = ("", "auto", "local")  # Ray's own keywords: find a running instance, or start one

_IN_FLIGHT = 2  # chunks queued per actor: the next one is ready when the current one ends
_LOOKAHEAD = 64  # chunks searched for one of the reference an actor already holds


def chunk_by_reference(tasks: Sequence[PairTask], size: int) -> list[list[PairTask]]:
    """``tasks`` in plan order cut into chunks of at most ``size`` pairs, each of one reference path."""
    chunks: list[list[PairTask]] = []
    for task in plan(tasks):
        if chunks and chunks[-1][0].ref == task.ref and len(chunks[-1]) < size:
            chunks[-1].append(task)
        else:
            chunks.append([task])
    return chunks


class _Worker:
    """The actor's body (a plain class, so it can be tested without Ray)."""

    def __init__(self, metrics: list[str], columns: list[str], device: str, memory: str, decode_threads: int,
                 prefetch: int, params: dict[str, dict[str, Any]] | None = None) -> None:
        from fusedsim.engine.scorer import Scorer

        self.runner = PairRunner(Scorer(metrics, device=device, memory=memory, params=params), columns)
        self.decode_threads = decode_threads
        self.prefetch = prefetch

    def ready(self) -> str:
        return str(self.runner.scorer.device)

    def score(self, chunk: list[PairTask]) -> tuple[list[PairOutcome], int]:
        before = self.runner.prepared
        # threads: decoding restarts with every chunk of a few dozen pairs, too short to repay starting worker
        # processes, and the actors themselves already spread the work over the cluster's processes
        pairs = decode_ahead(chunk, self.decode_threads, self.prefetch, mode="threads")
        outcomes = list(self.runner.run_all(pairs))
        return outcomes, self.runner.prepared - before


def _host_port(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST[:PORT]``; ``ValueError`` otherwise."""
    client = address.startswith("ray://")
    rest = address[len("ray://"):] if client else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or (client and "]" in port):
        host, port = rest.rstrip("/"), str(_RAY_CLIENT_PORT) if client else ""
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--address {address}: a Ray cluster address is HOST:PORT (the head's GCS port, 6379 by "
                         "default), ray://HOST[:PORT] (Ray Client), auto or local")
    return host, int(port)


def check_address(address: str | None, timeout_s: float = ADDRESS_TIMEOUT_S) -> None:
    """Raise ``ValueError`` naming ``address`` unless its host accepts a TCP connection within ``timeout_s``
    (``None``, ``auto`` and ``local`` are Ray's to resolve and are not probed). A refused or silent host is the
    common mistake (wrong host, head not started, firewall); the probe turns Ray's long retry loop and traceback
    into one line."""
    if address is None or address.strip().lower() in _NOT_PROBED:
        return
    host, port = _host_port(address.strip())
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except socket.gaierror as exc:
        raise ValueError(f"cannot reach the Ray cluster at {address}: unknown host {host!r} ({exc.strerror})") from None
    except TimeoutError:
        raise ValueError(f"cannot reach the Ray cluster at {address}: no answer within {timeout_s:g} s (is the host "
                         "right, and is a firewall in the way?)") from None
    except OSError as exc:
        raise ValueError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} (is `ray start --head` "
                         "running there, on that port?)") from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError("--engine ray needs Ray: pip install 'fusedsim[ray]'") from None
    return ray


class RayBatch:
    """Actors on a Ray cluster, ready to score (construction fails early on a bad cluster, device or metric).

    Args:
        metrics, columns: the Scorer's metrics and the output columns (:func:`~fusedsim.engine.batch_pairs.
            metric_columns`).
        device: ``auto`` (one actor per GPU, else CPU actors), ``cpu`` (CPU actors) or ``cuda`` (GPUs required).
        memory: the Scorer's memory mode.
        address: the cluster (``ray.init(address=...)``); None starts a local instance unless Ray is running.
        workers: CPU actors when no GPU is used (default: the cluster's CPUs).
        chunk: pairs per task.
        params: the Scorer's per-metric parameters.
    """

    def __init__(self, metrics: Sequence[str], columns: Sequence[str], *, device: str = "auto",
                 memory: str = "auto", address: str | None = None, workers: int | None = None,
                 prefetch: int = 32, chunk: int = 32, params: dict[str, dict[str, Any]] | None = None) -> None:
        ray = self.ray = _import_ray()
        self._started = False
        if not ray.is_initialized():
            check_address(address or os.environ.get("RAY_ADDRESS"))
            kwargs: dict[str, Any] = {"address": address} if address else {}
            if not address and workers:
                kwargs["num_cpus"] = workers
            ray.init(include_dashboard=False, logging_level="ERROR", **kwargs)
            self._started = True
        try:
            self._start_actors(list(metrics), list(columns), device, memory, workers, prefetch, params)
        except BaseException:
            self.shutdown()
            raise
        self.chunk = chunk

    def _start_actors(self, metrics, columns, device, memory, workers, prefetch, params) -> None:
        ray = self.ray
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        cpus = max(1, int(resources.get("CPU", 1)))
        if ":" in device:
            raise ValueError(f"--device {device}: with --engine ray each actor gets one GPU of its own; use cuda or "
                             "auto (CUDA_VISIBLE_DEVICES on the nodes chooses which GPUs Ray lends)")
        if device.startswith("cuda") and gpus == 0:
            raise ValueError(f"--device {device}: the Ray cluster has no GPU")
        actor = ray.remote(_Worker)
        if gpus and device != "cpu":
            # each actor sees only its GPU, as cuda:0
            count, options, actor_device = gpus, {"num_gpus": 1, "num_cpus": 0}, "cuda"
            threads = max(1, min(8, cpus // gpus))
        else:
            count, options, actor_device = min(workers or cpus, cpus), {"num_cpus": 1}, "cpu"
            threads = 1
        self.actors = [actor.options(**options).remote(metrics, columns, actor_device, memory, threads, prefetch,
                                                       params)
                       for _ in range(count)]
        try:
            self.devices = ray.get([a.ready.remote() for a in self.actors])
        except Exception as exc:  # an actor that cannot build its Scorer: the cause is the error's last line
            raise RuntimeError(f"Ray actors could not start: {_cause(exc)}") from None

    def outcomes(self, tasks: Sequence[PairTask], stats: dict[str, Any]) -> Iterator[PairOutcome]:
        """Score ``tasks``; outcomes in the order chunks finish. ``stats['prepared']`` counts prepared refs."""
        ray = self.ray
        queue = deque(chunk_by_reference(tasks, self.chunk))
        held: dict[int, str] = {}  # actor -> reference path of its last chunk
        running: dict[Any, tuple[int, list[PairTask]]] = {}
        load = [0] * len(self.actors)

        def submit(i: int) -> None:
            if not queue:
                return
            pick = 0
            for j in range(min(len(queue), _LOOKAHEAD)):
                if queue[j][0].ref == held.get(i):
                    pick = j
                    break
            chunk = queue[pick]
            del queue[pick]
            held[i] = chunk[0].ref
            running[self.actors[i].score.remote(chunk)] = (i, chunk)
            load[i] += 1

        try:
            for i in range(len(self.actors)):
                for _ in range(_IN_FLIGHT):
                    submit(i)
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                i, chunk = running.pop(ready[0])
                load[i] -= 1
                try:
                    outcomes, prepared = ray.get(ready[0])
                except Exception as exc:  # the actor died or its task failed: the chunk's pairs get the error
                    message = f"Ray worker failed: {_cause(exc)}"
                    outcomes, prepared = [PairOutcome(t.index, {}, "", message) for t in chunk], 0
                stats["prepared"] = stats.get("prepared", 0) + prepared
                submit(i)
                yield from outcomes
        finally:
            for ref in running:
                ray.cancel(ref)

    def shutdown(self) -> None:
        """Release the actors, and stop Ray if this object started it."""
        for a in getattr(self, "actors", ()):
            self.ray.kill(a)
        self.actors = []
        if self._started:
            self.ray.shutdown()
            self._started = False


def _cause(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__
