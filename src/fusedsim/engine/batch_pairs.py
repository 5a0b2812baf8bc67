"""Batch scoring of image-file pairs: ordered plan, decoding ahead, one prepared reference at a time.

* :func:`plan` orders pairs so equal reference paths are consecutive (stable: file order within a reference).
* :func:`decode_ahead` decodes pairs in worker threads or worker processes (:mod:`fusedsim.engine.decode_workers`),
  at most ``prefetch`` pairs ahead of the consumer, so image decoding overlaps scoring; a reference shared by
  consecutive pairs is decoded and hashed once.
* :class:`PairRunner` scores decoded pairs with a :class:`~fusedsim.engine.Scorer`; it prepares a reference only
  when the xxhash of its decoded pixels differs from the prepared one, so equal images under different paths
  reuse the state too. Consecutive pairs of one size go to the scorer in groups (one call per perceptual metric
  on a GPU). A failing pair becomes an outcome with NaN values and the error, never an exception.

The local CLI path and the Ray actors (:mod:`fusedsim.engine.ray_batch`) run this same code.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from fusedsim.io.images import ImageData
    from fusedsim.metrics.registry import MetricSpec

__all__ = ["DECODER_MODES", "DecodedPair", "PairOutcome", "PairRunner", "PairTask", "decode_ahead", "decoder_mode",
           "default_prefetch", "default_workers", "from_memory_order", "image_bytes_estimate", "memory_order",
           "metric_columns", "pixel_hash", "plan"]

DECODER_MODES = ("auto", "threads", "processes")


@dataclass(frozen=True)
class PairTask:
    """One pair to score: ``index`` (its row in the pairs table) and the two image paths."""

    index: int
    ref: str
    dist: str


@dataclass
class DecodedPair:
    """A task with its decoded images (``ref_key``: hash of the reference pixels), or the decoding error."""

    task: PairTask
    ref: ImageData | None = None
    ref_key: str = ""
    dist: ImageData | None = None
    error: str = ""


@dataclass
class PairOutcome:
    """Scores of one pair: ``values`` by output column (NaN when it failed), the backend used, the error."""

    index: int
    values: dict[str, float]
    backend: str = ""
    error: str = ""
    downgrades: list[str] = field(default_factory=list)


def metric_columns(specs: Sequence[MetricSpec]) -> list[str]:
    """Output columns of ``specs``: the metric name for one output, ``name.field`` for several."""
    columns = []
    for spec in specs:
        if len(spec.outputs) == 1:
            columns.append(spec.name)
        else:
            columns.extend(f"{spec.name}.{out}" for out in spec.outputs)
    return columns


def memory_order(pixels: torch.Tensor) -> tuple[torch.Tensor, str]:
    """``pixels`` ``(1, C, H, W)`` as a contiguous tensor over the same memory, and its layout: ``"chw"`` (the
    tensor itself) or ``"hwc"`` (interleaved samples: the ``(1, H, W, C)`` view); other layouts are copied to
    ``"chw"``."""
    if pixels.is_contiguous():
        return pixels, "chw"
    interleaved = pixels.permute(0, 2, 3, 1)
    if interleaved.is_contiguous():
        return interleaved, "hwc"
    return pixels.contiguous(), "chw"


def from_memory_order(flat: torch.Tensor, shape: tuple[int, ...], layout: str) -> torch.Tensor:
    """The ``(1, C, H, W)`` pixels of ``shape`` over ``flat`` laid out as :func:`memory_order` says."""
    if layout == "hwc":
        n, c, h, w = shape
        return flat.view(n, h, w, c).permute(0, 3, 1, 2)
    return flat.view(shape)


def plan(tasks: Iterable[PairTask]) -> list[PairTask]:
    """``tasks`` with equal reference paths made consecutive (first appearance order, then file order)."""
    first: dict[str, int] = {}
    ordered = list(tasks)
    for t in ordered:
        first.setdefault(t.ref, len(first))
    return sorted(ordered, key=lambda t: (first[t.ref], t.index))


def pixel_hash(image: ImageData) -> str:
    """xxhash (xxh3-128) of the decoded pixels in their memory order, with their shape, layout and bit depth
    (blake2b without xxhash). Equal images read by the same reader get equal keys."""
    pixels, layout = memory_order(image.pixels)
    array = pixels.numpy()
    head = f"{tuple(image.pixels.shape)}:{layout}:{image.bit_depth}:".encode()
    try:
        import xxhash
    except ImportError:  # same role, slower: the key only has to tell images apart
        return "b2:" + hashlib.blake2b(head + array.tobytes(), digest_size=16).hexdigest()
    h = xxhash.xxh3_128(head)
    h.update(memoryview(array).cast("B"))
    return "xx:" + h.hexdigest()


# the decoders read interleaved samples: the device reorders them (see read_image_interleaved)
def read_reference(path: str) -> tuple[ImageData, str]:
    from fusedsim.io.images import read_image_interleaved

    image = read_image_interleaved(path, "REF")
    return image, pixel_hash(image)


def read_distorted(path: str) -> ImageData:
    from fusedsim.io.images import read_image_interleaved

    return read_image_interleaved(path, "DIST")


def error_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # one line: rows of a table


# ``auto`` decodes in processes from this many workers on: up to about two, threads scale with the cores (the
# GIL is free during most of Pillow's decoding), while processes pay a start-up and a copy into shared memory
PROCESS_WORKERS_MIN = 4


def decoder_mode(mode: str, workers: int) -> str:
    """``threads`` or ``processes`` for a requested ``mode`` (``auto``: processes from
    :data:`PROCESS_WORKERS_MIN` workers on)."""
    if mode not in DECODER_MODES:
        raise ValueError(f"decoder mode must be one of {', '.join(DECODER_MODES)}; got {mode!r}")
    if mode == "auto":
        return "processes" if workers >= PROCESS_WORKERS_MIN else "threads"
    return mode


#: processes plus the scoring thread ``default_workers`` keeps within: on a 64-CPU machine whose CPUs give about 32
#: cores' throughput (a zlib inflate in N processes peaks at N = 32), ``fusedsim batch`` scored 1024² PNG pairs
#: fastest end to end with 31-40 decoding processes; 48 and 63 slowed the scoring thread more than they decoded
#: (63: 6-37% fewer pairs/s than 31). Set ``--workers`` to go beyond.
DECODE_CPUS_MAX = 32


def default_workers(mode: str) -> int:
    """Decoding workers when none are asked for: for ``processes`` and ``auto`` every usable core but one, at most
    ``DECODE_CPUS_MAX - 1`` (processes scale with the cores; the one left runs the scoring thread, which otherwise
    waits for a core while the GPU idles), at most 8 for ``threads`` (past that the GIL adds little)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, DECODE_CPUS_MAX) - 1) if mode in ("processes", "auto") else min(8, cores)


#: pairs decoded ahead of scoring when none is asked for: at least this many, and eight images per worker (two
#: chunks of four in flight: ``decode_workers``), within a share of the memory
PREFETCH_MIN = 32


def default_prefetch(workers: int, image_bytes: int | None = None) -> int:
    """Pairs decoded ahead when none are asked for: ``max(PREFETCH_MIN, 8 * workers)``, at most as many as keep
    the decoded pixels in flight (``image_bytes`` per image, two per pair) within an eighth of the machine's
    memory. With fewer, a process worker that has finished waits idle until the in-order consumer takes its
    images, and each image travels alone (on 64 cores: 232 pairs/s with 32 pairs ahead, one image per item)."""
    want = max(PREFETCH_MIN, 8 * workers)
    if image_bytes:
        want = min(want, max(1, _memory_bytes() // 8 // (2 * image_bytes)))
    return want


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return 16 << 30


def image_bytes_estimate(path: str) -> int | None:
    """Decoded size of the image at ``path`` from its header (8-bit samples stay bytes, 16-bit ones become
    float32, as :func:`fusedsim.io.images.read_image` keeps them); None when it cannot be read. Only a regular file
    is opened: reading a FIFO's header would block until a writer comes, or take bytes from its one stream (the
    pair's own read then refuses the FIFO by name)."""
    from PIL import Image

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except (OSError, ValueError):
        return None
    try:
        with Image.open(path) as img:
            width, height, mode = img.width, img.height, img.mode
    except Exception:
        return None
    if mode.startswith("I"):  # 16- and 32-bit integer modes
        return width * height * 4
    return width * height * (1 if mode in ("1", "L", "LA") else 3)


def decode_ahead(tasks: Sequence[PairTask], workers: int = 4, prefetch: int = 16,
                 mode: str = "auto") -> Iterator[DecodedPair]:
    """Decode ``tasks`` in order, at most ``prefetch`` pairs ahead of the consumer, as :class:`DecodedPair`.

    ``mode``: ``threads`` (``workers`` threads of this process: no start-up, but the GIL caps the rate at a few
    cores), ``processes`` (``workers`` processes returning pixels through shared memory: scales with the cores;
    the first start in a process takes about a second, later ones a tenth; the calling script needs the
    ``if __name__ == "__main__":`` guard, as for any ``multiprocessing`` code) or ``auto``
    (:func:`decoder_mode`). Either way a bad file becomes the pair's ``error``, and closing the iterator early
    stops the workers.
    """
    if workers < 1 or prefetch < 1:
        raise ValueError(f"workers and prefetch must be >= 1; got {workers} and {prefetch}")
    if decoder_mode(mode, workers) == "processes":
        from fusedsim.engine.decode_workers import decode_in_processes

        return decode_in_processes(tasks, workers, prefetch)
    return _decode_threads(tasks, workers, prefetch)


def _decode_threads(tasks: Sequence[PairTask], workers: int, prefetch: int) -> Iterator[DecodedPair]:
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fusedsim-decode")
    pending: deque[tuple[PairTask, Future, Future]] = deque()
    ref_path, ref_future = None, None

    def submit(task: PairTask) -> None:
        nonlocal ref_path, ref_future
        if task.ref != ref_path or ref_future is None:
            ref_path, ref_future = task.ref, pool.submit(read_reference, task.ref)
        pending.append((task, ref_future, pool.submit(read_distorted, task.dist)))

    def resolve(task: PairTask, ref_f: Future, dist_f: Future) -> DecodedPair:
        out = DecodedPair(task)
        try:
            out.ref, out.ref_key = ref_f.result()
            out.dist = dist_f.result()
        except Exception as exc:
            out.ref, out.ref_key, out.dist = None, "", None
            out.error = error_text(exc)
        return out

    try:
        for task in tasks:
            submit(task)
            if len(pending) >= prefetch:
                yield resolve(*pending.popleft())
        while pending:
            yield resolve(*pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


#: pairs :meth:`PairRunner.run_all` queues beyond the one whose values it reads back: while the device computes,
#: the host receives, converts and queues the next pairs (reading a value back waits for the device)
RUN_AHEAD = 2
#: consecutive pairs of one size that :meth:`PairRunner.run_all` hands to the scorer together
#: (:meth:`~fusedsim.engine.Scorer.submit_group`: one call per perceptual metric instead of one per pair)
GROUP = 8


def stop_if_systemic(exc: BaseException) -> None:
    """Raise a ``RuntimeError`` for an error that every pair would meet (a missing module: an installation fault,
    not the pair's), so the run stops at its first pair instead of writing the same error into every row."""
    if isinstance(exc, ImportError):
        raise RuntimeError(f"every pair would fail the same way, so the run stops here: {error_text(exc)} (a "
                           "missing or broken installation; fix it and run again)") from exc


class PairRunner:
    """Scores decoded pairs with one ``scorer`` for the output ``columns`` (see :func:`metric_columns`)."""

    def __init__(self, scorer: Any, columns: Sequence[str]) -> None:
        self.scorer = scorer
        self.columns = list(columns)
        self._ref_key = ""
        self._ref: ImageData | None = None  # the scorer's reference, whose pixels hash to _ref_key
        self.prepared = 0  # references taken (a reused one is not counted again)

    def _failed(self, task: PairTask, error: str) -> PairOutcome:
        return PairOutcome(task.index, {c: math.nan for c in self.columns}, "", error)

    def run(self, pair: DecodedPair) -> PairOutcome:
        """Score one decoded pair; errors (bad files, sizes, metric errors) are returned in the outcome."""
        return self._outcome(self._submit(pair))

    def run_all(self, pairs: Iterable[DecodedPair], ahead: int | None = None,
                group: int | None = None) -> Iterator[PairOutcome]:
        """Outcomes of ``pairs`` in order, each read back only after up to ``ahead`` later pairs were queued
        (default :data:`RUN_AHEAD`; 0: one pair at a time), so the device computes while the host receives and
        queues the next pairs. Up to ``group`` consecutive pairs of one size (default :data:`GROUP`; 1: one at a
        time) are queued together, either all against one reference or each with its own (see :meth:`_groups`);
        with ``ahead`` > 0 the last group stays queued while the one before it is read back. A pair whose values
        are not read back yet is not in the outcomes: stopping early loses no finished row."""
        ahead = RUN_AHEAD if ahead is None else ahead
        group = GROUP if group is None else group
        if ahead < 0:
            raise ValueError(f"ahead must be >= 0; got {ahead}")
        if group < 1:
            raise ValueError(f"group must be >= 1; got {group}")
        if not getattr(self.scorer, "scores_groups", False):  # no metric would take a group in one call
            group = 1
        queued: deque[tuple[PairTask, Any]] = deque()
        for members in self._groups(pairs, group):
            queued.extend(self._submit_group(members) if len(members) > 1 else [self._submit(members[0])])
            keep = max(ahead, len(members)) if ahead else 0
            while len(queued) > keep:
                yield self._outcome(queued.popleft())
        while queued:
            yield self._outcome(queued.popleft())

    @staticmethod
    def _groups(pairs: Iterable[DecodedPair], size: int) -> Iterator[list[DecodedPair]]:
        """Consecutive pairs in groups of at most ``size``: decoded pairs of one size, channel count and bit depth
        that either all share a reference (same pixel hash) or each differ from the previous pair's (one
        reference per pair, as in a list of unrelated pairs). A pair that failed to decode or whose images do not
        match is a group of its own (its error is reported as usual)."""
        members: list[DecodedPair] = []
        for pair in pairs:
            if members and not PairRunner._joins(members, pair, size):
                yield members
                members = []
            members.append(pair)
            if not PairRunner._groupable(pair):
                yield members
                members = []
        if members:
            yield members

    @staticmethod
    def _groupable(pair: DecodedPair) -> bool:
        ref, dist = pair.ref, pair.dist
        return (not pair.error and ref is not None and dist is not None and ref.width == dist.width
                and ref.height == dist.height and ref.channels == dist.channels and ref.bit_depth == dist.bit_depth)

    @staticmethod
    def _joins(members: list[DecodedPair], pair: DecodedPair, size: int) -> bool:
        first, last = members[0], members[-1]
        if len(members) >= size or not PairRunner._groupable(pair):
            return False
        a, b = first.ref, pair.ref
        assert a is not None and b is not None
        if (a.width, a.height, a.channels, a.bit_depth) != (b.width, b.height, b.channels, b.bit_depth):
            return False
        same = pair.ref_key == last.ref_key
        if len(members) == 1:  # the second pair decides: one shared reference, or one reference per pair
            return True
        return same if first.ref_key == last.ref_key else not same

    def _submit_group(self, members: list[DecodedPair]) -> list[tuple[PairTask, Any]]:
        """Like :meth:`_submit` for every pair of a group from :meth:`_groups`."""
        shared = members[0].ref_key == members[-1].ref_key
        if shared:
            ref = self._reference(members[0])
            pairs = [(ref, m.dist) for m in members]
        else:
            pairs = [(m.ref, m.dist) for m in members]
            self._ref_key, self._ref = "", None  # the scorer's reference changes pair by pair
            self.prepared += len(members)
        try:
            pending = self.scorer.submit_group(pairs)
        except Exception as exc:  # e.g. a metric's minimum size: every pair of the group fails the same way
            stop_if_systemic(exc)
            return [(m.task, error_text(exc)) for m in members]
        for p in pending:
            if isinstance(p, Exception):
                stop_if_systemic(p)
        return [(m.task, p if not isinstance(p, Exception) else error_text(p)) for m, p in zip(members, pending)]

    def _reference(self, pair: DecodedPair) -> ImageData:
        """The reference object for ``pair``: the prepared one when the pixels hash the same (reused state)."""
        if pair.ref_key != self._ref_key or self._ref is None:
            assert pair.ref is not None
            self._ref_key, self._ref = pair.ref_key, pair.ref
            self.prepared += 1
        return self._ref

    def _submit(self, pair: DecodedPair) -> tuple[PairTask, Any]:
        """``(task, PendingScore)``, or ``(task, error text)`` for a pair that failed before its values (the
        images are not kept: their host memory may go back to the decoder once the pair is queued)."""
        from fusedsim.io.images import check_image_pair

        if pair.error:
            return pair.task, pair.error
        assert pair.ref is not None and pair.dist is not None
        try:
            check_image_pair(pair.ref, pair.dist)
            if pair.ref_key != self._ref_key or self._ref is None:
                self.scorer.set_reference(self._reference(pair))
            return pair.task, self.scorer.submit_prepared(pair.dist)
        except Exception as exc:  # one bad pair must not stop the batch
            stop_if_systemic(exc)
            return pair.task, error_text(exc)

    def _outcome(self, submitted: tuple[PairTask, Any]) -> PairOutcome:
        task, pending = submitted
        if isinstance(pending, str):
            return self._failed(task, pending)
        try:
            result = pending.result()
        except Exception as exc:  # an error the device reported while computing this pair
            stop_if_systemic(exc)
            return self._failed(task, error_text(exc))
        values = {c: math.nan for c in self.columns}
        for name, value in result.values.items():
            if isinstance(value, dict):
                values.update({f"{name}.{k}": float(v) for k, v in value.items()})
            else:
                values[name] = float(value)
        return PairOutcome(task.index, values, result.backend, "", list(result.downgrades))
