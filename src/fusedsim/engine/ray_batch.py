"""``fusedsim batch --engine ray``: score pairs on every GPU (or on CPU actors) of a Ray cluster.

Design (measured against the earlier one-call-per-chunk actors, which ran at an eighth of the local engine's
pairs/s on one GPU):

* **Chunks** of ``chunk`` consecutive pairs in plan order (:func:`chunks`), whatever their references: a list
  where every pair has its own reference no longer becomes one remote call per pair.
* **Decoding in CPU tasks**: each chunk is decoded by a Ray task of one CPU (:func:`~fusedsim.engine.ray_wire.
  decode_chunk`) placed on the node of the actor that will score it (soft affinity: another node when that one is
  full), so every node's free cores decode for its own GPUs, and the pixels reach the actor through the node's
  shared-memory object store without a copy. Decoding in threads inside the actor was capped by the GIL at a few
  cores; the local engine decodes in up to 31 processes.
* **One scoring thread per actor** over a stream of chunks (:class:`~fusedsim.engine.ray_actor.ScoringWorker`):
  grouping and run-ahead carry across chunk boundaries, as in the local engine.
* **In-flight depth**: per actor, enough chunks to keep its share of the cluster's free CPUs decoding plus two
  queued at the actor, within a quarter of the object store (``prefetch`` pairs caps it).
* A free actor takes the next chunk that starts with the reference its last chunk ended with, when there is one
  among the next :data:`LOOKAHEAD` chunks (its prepared reference is reused).

Without GPUs (or with ``device="cpu"``) it starts ``workers`` CPU actors (default: the cluster's CPUs); the CPUs
left over decode, and when none are, each actor decodes its own chunks (in the thread of the call, while its
scoring thread works on the previous chunk).

**Faults**: when an actor dies (its process or its node), the chunks it held go back to the queue and are scored
by the other actors; a chunk that fails :data:`ATTEMPTS` times gets the error in its rows. Only when every actor
is gone does the run stop (``RuntimeError``), keeping every finished row for ``--resume``. Results come back to
the driver chunk by chunk and are written by the same incremental output as the local path, so a killed driver
loses no finished row either.

With ``address`` (a running cluster) the driver ships its own fusedsim to the workers (:func:`job_runtime_env`);
the nodes need its dependencies (torch, Triton, Pillow...). Image paths must be readable by every node (a shared
file system, or object-store URIs: :mod:`fusedsim.io.images`). Ray is an optional extra:
``pip install 'fusedsim[ray]'``. Ray Data was considered and not used: its actor pools cannot route a chunk to the
actor that holds its reference, it moves images as Arrow tensor columns (a copy per stage), and it needs pandas,
which this package does not otherwise use.

A cluster address is probed first (:func:`check_address`: one TCP connection, a few seconds at most): Ray's own
connection attempt retries for 20-odd seconds and ends in a traceback that does not name the address.
"""

from __future__ import annotations

import os
import socket
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fusedsim.engine.batch_pairs import GROUP, PairOutcome, PairTask, image_bytes_estimate, plan

__all__ = ["ADDRESS_TIMEOUT_S", "ATTEMPTS", "CHUNK", "FORWARDED_ENV", "RayBatch", "check_address", "chunks",
           "forwarded_env", "in_flight_depth", "job_runtime_env", "remote_cluster"]

ADDRESS_TIMEOUT_S = 5.0  # a cluster head that does not accept a connection in this time is reported unreachable
_RAY_CLIENT_PORT = 10001  # the default port of ``ray://`` addresses
_NOT_PROBED = ("", "auto", "local")  # Ray's own keywords: find a running instance, or start one

#: pairs per chunk: one decoding task, one actor call; a group of the scorer's size, so a GPU actor's stacked
#: calls are full, and at 1024² about a third of a second of one core's decoding
CHUNK = GROUP
LOOKAHEAD = 64  # chunks searched for one that continues the reference an actor holds
ATTEMPTS = 3  # times a chunk is sent to an actor before its pairs get the error
QUEUED_AT_ACTOR = 2  # decoded chunks waiting at an actor beyond the decoding ones: the scoring thread never waits
MAX_DEPTH = 64  # chunks in flight per actor at most
OBJECT_STORE_SHARE = 4  # decoded pairs in flight stay within 1/4 of the object store


def chunks(tasks: Sequence[PairTask], size: int) -> list[list[PairTask]]:
    """``tasks`` in plan order (equal references consecutive) cut into chunks of ``size`` pairs (the last shorter)."""
    if size < 1:
        raise ValueError(f"chunk must be >= 1; got {size}")
    ordered = plan(tasks)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def in_flight_depth(free_cpus: int, actors: int, chunk: int, pair_bytes: int | None = None,
                    object_store_bytes: int | None = None, prefetch: int | None = None) -> int:
    """Chunks in flight per actor: each actor's share of the ``free_cpus`` decoding plus :data:`QUEUED_AT_ACTOR`
    decoded ones waiting, at most :data:`MAX_DEPTH`; at most ``prefetch`` pairs when given, and within
    1/:data:`OBJECT_STORE_SHARE` of the object store at ``pair_bytes`` a pair; never fewer than two."""
    depth = min(MAX_DEPTH, max(1, free_cpus // max(1, actors)) + QUEUED_AT_ACTOR)
    if prefetch:
        depth = min(depth, -(-prefetch // chunk))
    if pair_bytes and object_store_bytes:
        depth = min(depth, object_store_bytes // (OBJECT_STORE_SHARE * actors * chunk * pair_bytes))
    return max(2, depth)


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


def remote_cluster(address: str | None) -> bool:
    """Whether ``address`` names a running cluster whose nodes may be other machines (not None or ``local``: Ray
    started on this machine)."""
    return bool(address) and address.strip().lower() != "local"


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


#: environment variables a driver passes on to its Ray workers (job runtime environment) when set: a shared
#: Triton kernel cache (``fusedsim warmup`` fills it) and this package's own settings
FORWARDED_ENV = ("TRITON_CACHE_DIR", "FUSEDSIM_CACHE_DIR", "FUSEDSIM_MAX_IMAGE_PIXELS", "FUSEDSIM_RAM_CAP_BYTES",
                 "FUSEDSIM_VRAM_CAP_BYTES")


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The :data:`FORWARDED_ENV` variables set in ``environ`` (default: this process's environment)."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in FORWARDED_ENV if environ.get(k)}


def job_runtime_env(ship_code: bool, environ: dict[str, str] | None = None,
                    kernel_cache: Path | None = None) -> dict[str, Any]:
    """The Ray job's runtime environment: :func:`forwarded_env`; with ``ship_code`` this package's own code
    (``py_modules``: Ray uploads it once per version, ~3 MB, and every worker imports it first), so the nodes of
    a cluster run the driver's fusedsim, whatever version they have installed (they need its dependencies); with
    ``kernel_cache`` that Triton cache folder too, which the actors then use (:mod:`fusedsim.engine.kernel_cache`;
    the driver's ``TRITON_CACHE_DIR`` is then not forwarded: it names a folder of the driver's machine)."""
    from fusedsim.engine.kernel_cache import SHIPPED_ENV

    runtime_env: dict[str, Any] = {}
    env = forwarded_env(environ)
    modules = []
    if kernel_cache is not None:
        env.pop("TRITON_CACHE_DIR", None)
        env[SHIPPED_ENV] = kernel_cache.name
        modules.append(str(kernel_cache))
    if env:
        runtime_env["env_vars"] = env
    if ship_code:
        import fusedsim

        modules.insert(0, os.path.dirname(os.path.abspath(fusedsim.__file__)))
    if modules:
        runtime_env["py_modules"] = modules
        runtime_env["excludes"] = ["__pycache__", "*.pyc"]
    return runtime_env


class RayBatch:
    """Actors on a Ray cluster, ready to score (construction fails early on a bad cluster, device or metric).

    Args:
        metrics, columns: the Scorer's metrics and the output columns (:func:`~fusedsim.engine.batch_pairs.
            metric_columns`).
        device: ``auto`` (one actor per GPU, else CPU actors), ``cpu`` (CPU actors) or ``cuda`` (GPUs required).
        memory: the Scorer's memory mode.
        address: the cluster (``ray.init(address=...)``); None starts a local instance unless Ray is running.
        workers: CPU actors when no GPU is used (default: the cluster's CPUs).
        prefetch: pairs in flight per actor at most (default: from the free CPUs and the object store:
            :func:`in_flight_depth`).
        chunk: pairs per task (:data:`CHUNK`).
        params: the Scorer's per-metric parameters.
        kernel_cache: a Triton cache folder shipped with the job to the nodes (with ``address``;
            :func:`~fusedsim.engine.kernel_cache.cache_to_ship`); ``kernel_caches`` then says which folder each
            actor uses.
    """

    def __init__(self, metrics: Sequence[str], columns: Sequence[str], *, device: str = "auto",
                 memory: str = "auto", address: str | None = None, workers: int | None = None,
                 prefetch: int | None = None, chunk: int = CHUNK,
                 params: dict[str, dict[str, Any]] | None = None, kernel_cache: Path | None = None) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1; got {chunk}")
        ray = self.ray = _import_ray()
        self._started = False
        self.shipped_name = ""  # the kernel cache folder shipped with the job, when this object started Ray
        if not ray.is_initialized():
            check_address(address or os.environ.get("RAY_ADDRESS"))
            kwargs: dict[str, Any] = {"address": address} if address else {}
            if not address and workers:
                kwargs["num_cpus"] = workers
            remote = remote_cluster(address)
            runtime_env = job_runtime_env(ship_code=remote, kernel_cache=kernel_cache if remote else None)
            self.shipped_name = kernel_cache.name if remote and kernel_cache is not None else ""
            if runtime_env:
                kwargs["runtime_env"] = runtime_env
            ray.init(include_dashboard=False, logging_level="ERROR", **kwargs)
            self._started = True
        self.chunk, self.prefetch = chunk, prefetch
        try:
            self._start_actors(list(metrics), list(columns), device, memory, workers, params)
        except BaseException:
            self.shutdown()
            raise

    def _start_actors(self, metrics, columns, device, memory, workers, params) -> None:
        from fusedsim.engine.ray_actor import ScoringWorker, host_threads_per_gpu
        from fusedsim.engine.ray_wire import decode_chunk

        ray = self.ray
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        cpus = max(1, int(resources.get("CPU", 1)))
        if ":" in device:
            raise ValueError(f"--device {device}: with --engine ray each actor gets one GPU of its own; use cuda or "
                             "auto (CUDA_VISIBLE_DEVICES on the nodes chooses which GPUs Ray lends)")
        if device.startswith("cuda") and gpus == 0:
            raise ValueError(f"--device {device}: the Ray cluster has no GPU")
        if gpus and device != "cpu":
            # each actor sees only its GPU, as cuda:0; its scoring thread takes a CPU when there are enough
            count, actor_cpus, actor_device = gpus, (1 if cpus > gpus else 0), "cuda"
            self.free_cpus = cpus - count * actor_cpus
        else:
            count, actor_cpus, actor_device = min(workers or cpus, cpus), 1, "cpu"
            self.free_cpus = cpus - count  # none by default: CPU actors then decode their own chunks
        actor = ray.remote(ScoringWorker)
        # score() calls wait in the actor's threads for their chunk's outcomes: one thread per chunk in flight
        options = {"num_gpus": 1 if actor_device == "cuda" else 0, "num_cpus": actor_cpus,
                   "max_concurrency": MAX_DEPTH + 2}
        threads = host_threads_per_gpu(ray.nodes()) if actor_device == "cuda" else 0
        self.actors = [actor.options(**options).remote(metrics, columns, actor_device, memory, params, threads)
                       for _ in range(count)]
        self._decode = ray.remote(num_cpus=1)(decode_chunk) if self.free_cpus >= 1 else None
        # the decoding workers import torch and the image reader while the actors build their scorers (not waited
        # for: on a cluster shared with other jobs their CPUs may come later)
        self._warm = [self._decode.remote([]) for _ in range(min(self.free_cpus, 64))] if self._decode else []
        try:
            infos = ray.get([a.ready.remote() for a in self.actors])
        except Exception as exc:  # an actor that cannot build its Scorer: the cause is the error's last line
            raise RuntimeError(f"Ray actors could not start: {_cause(exc)}") from None
        self.devices = [info["device"] for info in infos]
        self.nodes = [info["node"] for info in infos]
        self.pids = [info["pid"] for info in infos]
        self.kernel_caches = [info.get("kernel_cache", "") for info in infos]

    def depth(self, tasks: Sequence[PairTask]) -> int:
        """Chunks in flight per actor for ``tasks`` (:func:`in_flight_depth`; the first pair's file headers size a
        pair)."""
        image = image_bytes_estimate(tasks[0].ref) if tasks else None
        store = int(self.ray.cluster_resources().get("object_store_memory", 0)) or None
        return in_flight_depth(self.free_cpus, len(self.actors), self.chunk, 2 * image if image else None, store,
                               self.prefetch)

    def outcomes(self, tasks: Sequence[PairTask], stats: dict[str, Any]) -> Iterator[PairOutcome]:
        """Score ``tasks``; outcomes in the order chunks finish. ``stats`` gets ``prepared`` (references
        prepared), ``decode_s`` (decoding seconds, all tasks), ``idle_s`` (actors' scoring threads waiting for
        decoded pairs), ``streams`` (scoring streams the actors started: each restart drained a GPU's queue),
        ``retried`` (chunks sent again after an actor died) and ``actors_lost``."""
        ray = self.ray
        from ray.exceptions import RayActorError
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        queue: deque[tuple[list[PairTask], int]] = deque((c, 0) for c in chunks(tasks, self.chunk))
        if not queue:
            return
        depth = self.depth(tasks)
        for key in ("prepared", "decode_s", "idle_s", "streams", "retried", "actors_lost"):
            stats.setdefault(key, 0)
        live = list(range(len(self.actors)))
        held: dict[int, str] = {}  # actor -> reference path its last chunk ended with
        load = [0] * len(self.actors)
        running: dict[Any, tuple[int, list[PairTask], int]] = {}

        def submit(i: int) -> None:
            pick = 0
            for j in range(min(len(queue), LOOKAHEAD)):
                if queue[j][0][0].ref == held.get(i):
                    pick = j
                    break
            chunk, attempts = queue[pick]
            del queue[pick]
            held[i] = chunk[-1].ref
            decoded = None
            if self._decode is not None:
                near = NodeAffinitySchedulingStrategy(self.nodes[i], soft=True) if self.nodes[i] else "DEFAULT"
                decoded = self._decode.options(scheduling_strategy=near).remote(chunk)
            running[self.actors[i].score.remote(chunk, decoded)] = (i, chunk, attempts)
            load[i] += 1

        def fill() -> None:  # round robin, so every actor starts at once
            for _ in range(depth):
                for i in live:
                    if queue and load[i] < depth:
                        submit(i)

        def give_up(chunk: list[PairTask], message: str) -> list[PairOutcome]:
            return [PairOutcome(t.index, {}, "", message) for t in chunk]

        try:
            fill()
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                i, chunk, attempts = running.pop(ready[0])
                load[i] -= 1
                try:
                    result = ray.get(ready[0])
                except RayActorError as exc:  # the actor's process or node died: its chunks go to the others
                    if i in live:
                        live.remove(i)
                        stats["actors_lost"] += 1
                        print(f"fusedsim batch: the Ray actor on {self.devices[i]} (pid {self.pids[i]}) died "
                              f"({_cause(exc)}); its pairs in flight are scored by the {len(live)} others",
                              file=sys.stderr)
                    if not live:
                        left = sum(len(c) for c, _ in queue) + sum(len(c) for _, c, _ in running.values())
                        raise RuntimeError(f"every Ray actor died (last: {_cause(exc)}); {left + len(chunk)} pairs "
                                           "were not scored: rerun with --resume to score them") from None
                    if attempts + 1 < ATTEMPTS:
                        queue.appendleft((chunk, attempts + 1))
                        stats["retried"] += 1
                    else:
                        yield from give_up(chunk, f"Ray worker failed {ATTEMPTS} times: {_cause(exc)}")
                except Exception as exc:  # the chunk's task failed (decoding lost with its node, ...): again
                    if attempts + 1 < ATTEMPTS:
                        queue.appendleft((chunk, attempts + 1))
                        stats["retried"] += 1
                    else:
                        yield from give_up(chunk, f"Ray worker failed {ATTEMPTS} times: {_cause(exc)}")
                else:
                    stats["prepared"] += result.prepared
                    stats["decode_s"] += result.decode_s
                    stats["idle_s"] += result.idle_s
                    stats["streams"] += result.streams
                    yield from result.outcomes
                fill()
        finally:
            for ref in running:
                try:
                    ray.cancel(ref)
                except Exception:  # already finished, or its actor is gone
                    pass

    def shutdown(self) -> None:
        """Release the actors, and stop Ray if this object started it."""
        for a in getattr(self, "actors", ()):
            try:
                self.ray.kill(a)
            except Exception:  # already dead
                pass
        self.actors = []
        if self._started:
            self.ray.shutdown()
            self._started = False


def _cause(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__
