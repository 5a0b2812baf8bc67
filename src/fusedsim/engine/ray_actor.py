"""The Ray engine's scoring actor: one long-lived scoring thread fed with decoded chunks (a plain class, so it can be
tested without Ray).

Each :meth:`ScoringWorker.score` call (Ray runs several at once: a threaded actor) puts its chunk in the inbox and
waits for the chunk's outcomes. One scoring thread runs :meth:`~fusedsim.engine.batch_pairs.PairRunner.run_all`
over the inbox's chunks back to back, so grouping (one call per perceptual metric for up to ``GROUP`` pairs) and
run-ahead (the GPU computes a pair while the next ones are queued) carry across chunk boundaries, exactly as in the
local engine's one stream of pairs. The stream ends only when the inbox is empty (the last values are then read
back), so a chunk never waits for one that has not come. The prepared reference stays with the thread: a chunk
that continues the previous chunk's reference reuses it.

Ray starts its workers with ``OMP_NUM_THREADS`` set to their CPU count (one here), so torch's intra-op pool in an
actor had one thread where the local engine's scorer has the machine's cores (its copies of decoded images into
pinned memory, for one, are parallel). A GPU actor is given ``host_threads`` (the node's CPUs shared by its GPUs,
:func:`host_threads_per_gpu`) to run its host work as the local engine does.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fusedsim.engine.batch_pairs import DecodedPair, PairOutcome, PairRunner, PairTask
from fusedsim.engine.ray_wire import WireChunk, decode_chunk, decoded_pairs

__all__ = ["ChunkResult", "ScoringWorker", "host_threads_per_gpu"]


def host_threads_per_gpu(nodes: Sequence[dict[str, Any]]) -> int:
    """Threads for a GPU actor's host work: the fewest CPUs per GPU over the cluster's alive GPU nodes (``nodes``
    as ``ray.nodes()`` gives them), at least 1; 0 when no node has a GPU."""
    shares = [int(n["Resources"].get("CPU", 1)) // int(n["Resources"]["GPU"]) for n in nodes
              if n.get("Alive", True) and int(n.get("Resources", {}).get("GPU", 0)) > 0]
    return max(1, min(shares)) if shares else 0


@dataclass
class ChunkResult:
    """What :meth:`ScoringWorker.score` returns: the chunk's outcomes (in its order), references prepared while
    scoring it, the seconds its decoding took, the scoring thread's idle seconds since the last result (waiting
    for decoded pairs: the decode bound shows here) and the streams it started since then (each start follows an
    empty inbox, whose stream ended by reading every queued value back: the GPU's queue drained)."""

    outcomes: list[PairOutcome]
    prepared: int = 0
    decode_s: float = 0.0
    idle_s: float = 0.0
    streams: int = 0


@dataclass
class _Job:
    pairs: list[DecodedPair] | None
    count: int
    outcomes: list[PairOutcome] = field(default_factory=list)
    prepared: int = 0
    idle_s: float = 0.0
    streams: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class ScoringWorker:
    """A :class:`~fusedsim.engine.Scorer` with its scoring thread (see the module docstring)."""

    def __init__(self, metrics: Sequence[str], columns: Sequence[str], device: str, memory: str,
                 params: dict[str, dict[str, Any]] | None = None, host_threads: int = 0) -> None:
        import torch

        from fusedsim.engine.kernel_cache import adopt_shipped_cache
        from fusedsim.engine.scorer import Scorer

        if host_threads > 0:  # torch's intra-op pool as the local engine has it (see the module docstring)
            torch.set_num_threads(host_threads)
        # before any kernel compiles: the driver's kernels when it shipped them, else the package's compiled ones
        # where they fit this node's platform (a fresh node with no shared cache then compiles nothing they cover)
        if adopt_shipped_cache() is None and device != "cpu" and torch.cuda.is_available():
            from fusedsim.engine.kernel_archive import unpack_package_kernels

            unpack_package_kernels()
        self.runner = PairRunner(Scorer(list(metrics), device=device, memory=memory, params=params), list(columns))
        self._inbox: queue.Queue[_Job] = queue.Queue()
        self._reported = 0  # runner.prepared already reported
        self._idle_s = 0.0
        self._streams = 0  # streams started since the last result
        threading.Thread(target=self._loop, name="fusedsim-scoring", daemon=True).start()

    def ready(self) -> dict[str, Any]:
        """The actor's device, node, process (the driver places decoding next to it; tests kill it) and kernel
        cache folder ("" when Triton's default)."""
        node = ""
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # outside Ray (tests of the plain class)
            pass
        return {"device": str(self.runner.scorer.device), "node": node, "pid": os.getpid(),
                "kernel_cache": os.environ.get("TRITON_CACHE_DIR", "")}

    def score(self, tasks: Sequence[PairTask], decoded: WireChunk | None = None) -> ChunkResult:
        """Outcomes of ``tasks``, decoded by a CPU task (``decoded``) or, when None, here in the calling thread
        (CPU actors: the next chunk decodes while the scoring thread works on this one)."""
        if not tasks:
            return ChunkResult([])
        chunk = decoded if decoded is not None else decode_chunk(tasks)
        pairs = decoded_pairs(chunk)
        job = _Job(pairs, len(pairs))
        self._inbox.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return ChunkResult(job.outcomes, job.prepared, chunk.decode_s, job.idle_s, job.streams)

    def _loop(self) -> None:
        while True:
            start = time.perf_counter()
            first = self._inbox.get()
            self._idle_s += time.perf_counter() - start
            self._streams += 1
            open_jobs: deque[_Job] = deque()
            try:
                for outcome in self.runner.run_all(self._stream(first, open_jobs)):
                    job = open_jobs[0]
                    job.outcomes.append(outcome)
                    if len(job.outcomes) == job.count:
                        open_jobs.popleft()
                        self._finish(job)
            except BaseException as exc:  # run_all turns a pair's error into its outcome: this is a bug, not data
                while open_jobs:
                    job = open_jobs.popleft()
                    job.error = exc
                    job.done.set()

    def _stream(self, job: _Job, open_jobs: deque[_Job]) -> Iterator[DecodedPair]:
        """The pairs of ``job`` and of every job already waiting after it; ends when the inbox is empty."""
        while True:
            open_jobs.append(job)
            pairs, job.pairs = job.pairs or [], None  # the runner holds the images only while it needs them
            yield from pairs
            try:
                job = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _finish(self, job: _Job) -> None:
        job.prepared, self._reported = self.runner.prepared - self._reported, self.runner.prepared
        job.idle_s, self._idle_s = self._idle_s, 0.0
        job.streams, self._streams = self._streams, 0
        job.done.set()
