"""Two clips in, libvmaf's per-frame feature values out: the video pipeline behind ``fusedsim vmaf``.

The pipeline opens and aligns the clips, chooses the device and the CPU threads, streams frame batches through the
features (on a GPU with two regular files: :mod:`.device_scoring`, which reads only the planes the features need)
and pools values as libvmaf pools them. It has no command line: :mod:`fusedsim.cli.vmaf` parses options, shows
progress and writes libvmaf's layouts; benchmarks and library code call :func:`score_clips`. Frames stream in
batches, so memory does not grow with clip length. Importing this module imports neither torch nor numpy.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fusedsim.metrics.registry import MetricSpec, list_metrics

if TYPE_CHECKING:
    import numpy as np

    from fusedsim.families.vmaf.feature_requests import FeatureRequest
    from fusedsim.families.vmaf.model import VmafModel

    from fusedsim.io.video import FrameBatch, VideoFormat, VideoReader

__all__ = ["DEFAULT_FEATURES", "EXPECTED_METRICS", "ClipPair", "ClipScores", "check_device", "compute",
           "feature_specs", "load_features", "open_clips", "pool", "resolve_features", "score_clips", "set_threads"]

#: ``progress(frames)`` is called after each scored batch with its number of frames.
Progress = Callable[[int], None]
#: ``extract(feature, ref_batch, dist_batch, device=...) -> {libvmaf name: per-frame values}`` (the registry's
#: :func:`fusedsim.families.vmaf.features.extract`, or a stand-in).
Extract = Callable[..., Any]
Metrics = dict[str, "np.ndarray"]

#: Features scored when none are named.
DEFAULT_FEATURES = ("ssim",)
_AUTO_BATCH_BYTES = 128 * 2**20  # per clip, when no batch size is given
_MAX_AUTO_BATCH = 32


def feature_specs() -> dict[str, MetricSpec]:
    """The registry's libvmaf features (``vmaf:<feature>``) by feature name, in registry order (torch-free)."""
    return {s.short_name: s for s in list_metrics("video") if s.name.startswith("vmaf:")}


#: Metric columns a feature must produce (libvmaf names); guards against a backend answering with another algorithm.
EXPECTED_METRICS = {name: spec.outputs for name, spec in feature_specs().items()}


def load_features() -> Any:
    """The feature registry :mod:`fusedsim.families.vmaf.features` (imported on use: it pulls in torch)."""
    try:
        from fusedsim.families.vmaf import features
    except ImportError as exc:
        raise RuntimeError("the VMAF feature extractors (fusedsim.families.vmaf.features) cannot be imported: "
                           f"{exc}") from exc
    return features


def resolve_features(requested: Sequence[Any] | None, supported: Sequence[str]) -> list[FeatureRequest]:
    """Requested features (names, libvmaf's ``name=option=value:...`` strings or :class:`FeatureRequest`), checked
    against ``supported`` and their options validated; duplicates dropped, order kept."""
    from fusedsim.families.vmaf.feature_requests import FeatureRequest, parse_feature_option

    items = list(requested) if requested else list(DEFAULT_FEATURES)
    names = [item.extractor if isinstance(item, FeatureRequest) else str(item).partition("=")[0] for item in items]
    unknown = [n for n in names if n not in supported]
    if unknown:
        raise ValueError(
            f"unknown feature{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"supported features: {', '.join(supported)}"
        )
    requests = [item if isinstance(item, FeatureRequest) else parse_feature_option(str(item)) for item in items]
    return list(dict.fromkeys(requests))


# --------------------------------------------------------------------------------------------------------------
# device and threads


def check_device(device: str) -> None:
    """Raise now when ``device`` names a GPU that is not there: before any file is read, not after."""
    if device != "auto":
        from fusedsim.core.device import resolve_device

        resolve_device(device)


def set_threads(threads: int | None) -> None:
    """Size torch's CPU thread pool, and numba's for the CPU path of integer SSIM, to ``threads`` (0/None: auto)."""
    if not threads:
        return
    import torch

    torch.set_num_threads(threads)
    # numba is imported only by a CPU run: size its pool through the environment so a GPU run never loads it;
    # if something already imported it, set its threads directly
    numba = sys.modules.get("numba")
    if numba is None:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
    else:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


# --------------------------------------------------------------------------------------------------------------
# pooling


def pool(values: Iterable[float]) -> dict[str, float]:
    """min, max, mean and harmonic mean of a metric over frames, computed as libvmaf computes them.

    Sums run sequentially in frame order in double precision; min/max start from the first frame and take a later
    frame only if it compares smaller/larger (so a NaN after the first frame is skipped); the harmonic mean is
    libvmaf's ``n / sum(1 / (x + 1)) - 1`` (defined for scores of 0 too).
    """
    n = 0
    total = inv_total = 0.0
    lo = hi = math.nan
    for x in values:
        x = float(x)
        total += x
        inv_total += _div(1.0, x + 1.0)
        if n == 0 or x < lo:
            lo = x
        if n == 0 or x > hi:
            hi = x
        n += 1
    if n == 0:
        raise ValueError("cannot pool a metric over zero frames")
    return {"min": lo, "max": hi, "mean": total / n, "harmonic_mean": _div(float(n), inv_total) - 1.0}


def _div(a: float, b: float) -> float:
    """IEEE division (as in C): x/0 is +-inf, 0/0 and nan operands give nan."""
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


# --------------------------------------------------------------------------------------------------------------
# clips


@dataclass(frozen=True)
class ClipScores:
    """Per-frame values of one clip pair: ``metrics`` (libvmaf name -> float64 array, one value per frame, in
    feature order), the frame size, and the seconds spent scoring (for libvmaf's ``fps``)."""

    metrics: Metrics
    width: int
    height: int
    seconds: float

    @property
    def frames(self) -> int:
        return len(next(iter(self.metrics.values())))

    @property
    def fps(self) -> float | None:
        """Frames scored per second, None when the clock did not advance."""
        return self.frames / self.seconds if self.seconds > 0 else None


@dataclass(frozen=True)
class ClipPair:
    """A reference and a distorted clip, open (:func:`open_clips`)."""

    ref: VideoReader
    dist: VideoReader

    @property
    def fmt(self) -> VideoFormat:
        return self.ref.fmt

    def expected_frames(self, frames: int | None = None, frame_cnt: int | None = None) -> int | None:
        """The frames a comparison will take as far as known before reading (a progress bar's total); None when
        neither the clips (pipes) nor the limits tell."""
        limit = frames if frames is not None else frame_cnt
        try:
            counts = [c for c in (self.ref.frame_count, self.dist.frame_count) if c is not None]
        except ValueError:
            return limit  # scoring reports it with the clip's name
        return min([*counts, *([limit] if limit is not None else [])], default=limit)

    def score(self, features: Sequence[Any] = (), extract: Extract | None = None, *, device: str = "auto",
              frames: int | None = None, frame_cnt: int | None = None, batch_frames: int | None = None,
              progress: Progress | None = None, models: Sequence[VmafModel] = ()) -> ClipScores:
        """Score ``features`` on every frame pair (see :func:`compute`), then each of ``models`` (a column named
        after the model, from the features it reads, computed as the model asks whatever ``features`` says);
        ``extract`` defaults to the registry's."""
        extract = extract if extract is not None else load_features().extract
        requests = with_model_features(features, models)
        start = time.perf_counter()
        metrics = compute(self.ref, self.dist, requests, extract, device=device, frames=frames,
                          batch_frames=batch_frames, progress=progress, frame_cnt=frame_cnt)
        metrics = add_predictions(metrics, models)
        seconds = time.perf_counter() - start
        return ClipScores(metrics, self.fmt.width, self.fmt.height, seconds)


def with_model_features(features: Sequence[Any], models: Sequence[VmafModel]) -> list[FeatureRequest]:
    """The requested features (validated) followed by those the models read that are not among them."""
    from fusedsim.families.vmaf.model import feature_requests

    requested = resolve_features(features, tuple(feature_specs())) if features or not models else []
    for model in models:
        requested += feature_requests(model)
    return list(dict.fromkeys(requested))


def add_predictions(metrics: Metrics, models: Sequence[VmafModel]) -> Metrics:
    """``metrics`` with one column per model (named ``model.name``), after the features."""
    from fusedsim.families.vmaf.model import predict_from

    out = dict(metrics)
    for model in models:
        if model.name in out:
            raise ValueError(f"model name {model.name!r} is used twice (or by a feature); name each --model "
                             f"differently with name=")
        out[model.name] = predict_from(model, metrics)
    return out


@contextmanager
def open_clips(ref: str | os.PathLike, dist: str | os.PathLike, *, width: int | None = None,
               height: int | None = None, pix_fmt: str | None = None) -> Iterator[ClipPair]:
    """Open both clips: compressed video (mp4, mkv, webm, ...: decoded by PyAV, :mod:`fusedsim.io.compressed`), Y4M
    (layout from the header), or raw planar YUV with ``width``, ``height`` and ``pix_fmt`` (applied to every raw
    input); ``-`` is standard input. Closed on leaving the ``with`` block."""
    with _open_clip(ref, width, height, pix_fmt) as ref_reader, _open_clip(dist, width, height, pix_fmt) as dist_reader:
        yield ClipPair(ref_reader, dist_reader)


def _open_clip(path: str | os.PathLike, width: int | None, height: int | None, pix_fmt: str | None) -> Any:
    from fusedsim.io.compressed import is_compressed, open_compressed
    from fusedsim.io.video import open_video

    if is_compressed(path):
        return open_compressed(path)
    return open_video(path, width=width, height=height, pix_fmt=pix_fmt)


def _read_only_needed_planes(readers: Sequence[Any], features: Sequence[FeatureRequest]) -> None:
    """Compressed clips copy out only the planes the features read (luma for VMAF's features): decoding cannot be
    skipped, but chroma need not be copied, stacked or moved."""
    specs = feature_specs()
    if not all(request.extractor in specs for request in features):
        return  # a stand-in extract: give it every plane
    planes = tuple(p for p in ("y", "u", "v") if any(p in specs[r.extractor].planes for r in features))
    for reader in readers:
        if getattr(reader, "kind", None) == "compressed":
            reader.planes = planes or ("y",)


def score_clips(ref: str | os.PathLike, dist: str | os.PathLike, features: Sequence[str] = DEFAULT_FEATURES, *,
                device: str = "auto", frames: int | None = None, frame_cnt: int | None = None,
                threads: int | None = None, batch_frames: int | None = None, progress: Progress | None = None,
                width: int | None = None, height: int | None = None, pix_fmt: str | None = None,
                extract: Extract | None = None, models: Sequence[str | VmafModel] = ()) -> ClipScores:
    """libvmaf's per-frame ``features`` of the clip ``dist`` against ``ref``, and the scores of ``models``
    (built-in versions, libvmaf's ``--model`` strings such as ``"version=vmaf_v0.6.1:disable_clip"``, or loaded
    models), as columns named after
    the models.

    ``frames`` compares exactly the first N frames (both clips need them); ``frame_cnt`` (libvmaf's
    ``--frame_cnt``) at most N. ``threads`` sizes the CPU thread pools (process-wide). Without a limit both clips
    must have the same number of frames; they must always share size and pixel format.
    """
    from fusedsim.families.vmaf.model import load_models

    loaded = load_models(models) if models else []  # no model: features only
    features = resolve_features(features, tuple(feature_specs())) if features else []
    check_device(device)
    set_threads(threads)
    with open_clips(ref, dist, width=width, height=height, pix_fmt=pix_fmt) as clips:
        return clips.score(features, extract, device=device, frames=frames, frame_cnt=frame_cnt,
                           batch_frames=batch_frames, progress=progress, models=loaded)


# --------------------------------------------------------------------------------------------------------------
# streaming


def _auto_batch_frames(frame_bytes: int) -> int:
    return max(1, min(_MAX_AUTO_BATCH, _AUTO_BATCH_BYTES // max(1, frame_bytes)))


def compute(ref_reader: VideoReader, dist_reader: VideoReader, features: Sequence[FeatureRequest], extract: Extract, *,
            device: str = "auto", frames: int | None = None, batch_frames: int | None = None,
            progress: Progress | None = None, frame_cnt: int | None = None) -> Metrics:
    """Stream both clips in batches and return per-frame metrics (libvmaf name -> float64 array).

    ``extract(feature, ref_batch, dist_batch, device=...)`` is the registry function. Clips must share their format;
    their frame counts must match unless ``frames`` limits the comparison (both then need at least that many).
    ``frame_cnt`` (libvmaf's ``--frame_cnt``) compares at most that many frames: clips of the same length that are
    shorter are compared whole.
    """
    features = _as_requests(features)
    _read_only_needed_planes((ref_reader, dist_reader), features)
    frames, limit = _frame_limits(ref_reader, dist_reader, frames, frame_cnt)
    _check_formats(ref_reader, dist_reader)
    expected = _frames_to_compare(ref_reader, dist_reader, frames)
    streamed = _score_streamed(ref_reader, dist_reader, features, extract, device, expected, batch_frames, progress)
    if streamed is not None:
        return streamed
    batch_frames = batch_frames or _auto_batch_frames(ref_reader.fmt.frame_bytes)
    return _score_batches(ref_reader, dist_reader, features, extract, device=device, frames=frames,
                          batch_frames=batch_frames, limit=limit, progress=progress)


def _as_requests(features: Sequence[Any]) -> list[FeatureRequest]:
    """Feature names or ``name=option=value`` strings as requests (a name the registry does not know is kept
    as is, for a stand-in ``extract``)."""
    from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS, FeatureRequest, parse_feature_option

    out = []
    for item in features:
        if isinstance(item, FeatureRequest):
            out.append(item)
        elif str(item).partition("=")[0] in EXTRACTOR_OPTIONS:
            out.append(parse_feature_option(str(item)))
        else:
            out.append(FeatureRequest(str(item)))
    return out


def _frame_limits(ref: VideoReader, dist: VideoReader, frames: int | None,
                  frame_cnt: int | None) -> tuple[int | None, int | None]:
    """``(frames, limit)``: the exact number of frames both clips must give (None: all they have) and the most
    read. ``frame_cnt`` becomes an exact count when a clip's length is known and reaches it, none when the clips
    are shorter (then they must be equally long), and only a read limit on two pipes."""
    if frame_cnt is None or frames is not None:
        return frames, frames
    n_ref, n_dist = ref.frame_count, dist.frame_count
    if n_ref is not None and n_dist is not None and min(n_ref, n_dist) < frame_cnt:
        if n_ref != n_dist:
            raise ValueError(
                f"--frame_cnt {frame_cnt}: reference {ref.path} has {n_ref} frames but distorted "
                f"{dist.path} has {n_dist}"
            )
        return None, None
    if n_ref is not None or n_dist is not None:
        return frame_cnt, frame_cnt
    return None, frame_cnt  # two pipes: read up to frame_cnt, and accept fewer


def _check_formats(ref: VideoReader, dist: VideoReader) -> None:
    rf, df = ref.fmt, dist.fmt
    if rf != df:
        raise ValueError(
            f"reference {ref.path} is {rf.describe()} but distorted {dist.path} is {df.describe()}; "
            "both clips must have the same size and pixel format"
        )


def _frames_to_compare(ref: VideoReader, dist: VideoReader, frames: int | None) -> int | None:
    """The number of frames the comparison takes (None: unknown until two pipes end); an error when there is
    nothing to compare."""
    _check_frame_counts(ref, dist, frames)
    n_ref, n_dist = ref.frame_count, dist.frame_count
    expected = frames if frames is not None else (n_ref if n_ref is not None else n_dist)
    if expected == 0:
        raise ValueError("no frames to compare" + ("" if frames is not None else f": {ref.path} is empty"))
    return expected


def _check_frame_counts(ref: VideoReader, dist: VideoReader, frames: int | None) -> None:
    """The known frame counts must reach ``frames``, or without it be equal."""
    n_ref, n_dist = ref.frame_count, dist.frame_count
    if frames is not None:
        for role, reader, n in (("reference", ref, n_ref), ("distorted", dist, n_dist)):
            if n is not None and n < frames:
                raise ValueError(f"--frames {frames}: {role} {reader.path} has only {n} frames")
    elif n_ref is not None and n_dist is not None and n_ref != n_dist:
        raise ValueError(
            f"reference {ref.path} has {n_ref} frames but distorted {dist.path} has {n_dist}; "
            "pass --frames N to compare the first N frames"
        )


def _score_streamed(ref: VideoReader, dist: VideoReader, features: Sequence[FeatureRequest], extract: Extract,
                    device: str,
                    frames: int | None, batch_frames: int | None, progress: Progress | None) -> Metrics | None:
    """On a GPU, with two regular files and the registry's features: the streamed path
    (:mod:`fusedsim.families.vmaf.device_scoring`, same values, reads only the planes the features need); else None."""
    if not (ref.seekable and dist.seekable and frames):
        return None
    from fusedsim.families.vmaf import features as registry
    from fusedsim.families.vmaf.features import resolve_device

    dev = resolve_device(device)
    if dev.type != "cuda" or extract is not registry.extract:
        return None
    from fusedsim.families.vmaf.device_scoring import score_on_device

    return score_on_device(ref, dist, features, device=dev, frames=frames, batch_frames=batch_frames,
                           progress=progress)


def _score_batches(ref: VideoReader, dist: VideoReader, features: Sequence[FeatureRequest], extract: Extract, *,
                   device: str, frames: int | None, batch_frames: int, limit: int | None,
                   progress: Progress | None) -> Metrics:
    """Score batch after batch on the host, holding at most two batches of each clip."""
    import numpy as np

    scorer = _BatchScorer(features, extract, device, ref.fmt.bit_depth)
    columns: dict[str, list[np.ndarray]] = {}
    done = 0
    # each clip is read one batch ahead on its own thread while the current batch is scored: end to end the
    # command is bound by reading the files (benchmarks/README.md), so overlapping the reads is what pays
    ref_batches = _read_ahead(ref.batches(batch_frames, limit=limit))
    dist_batches = _read_ahead(dist.batches(batch_frames, limit=limit))
    while True:
        # (not zip_longest: its reused result tuple would keep the previous batch alive during the next read)
        ref_batch = next(ref_batches, None)
        dist_batch = next(dist_batches, None)
        if ref_batch is None and dist_batch is None:
            break
        _check_batch_pair(ref, dist, ref_batch, dist_batch, done, frames)
        _append_columns(columns, scorer.push(ref_batch, dist_batch))
        done += ref_batch.n
        if progress is not None:
            progress(ref_batch.n)
        del ref_batch, dist_batch  # free this batch before the readers allocate the next one
    _check_frames_done(ref, done, frames)
    _append_columns(columns, scorer.flush())
    return finish_columns(columns, done)


class _BatchScorer:
    """Host frame batches in, per-frame values out: the registry's features through a
    :class:`~fusedsim.families.vmaf.session.FeatureSession` (temporal features carried across batches), or a
    stand-in ``extract`` called per batch and feature."""

    def __init__(self, features: Sequence[FeatureRequest], extract: Extract, device: str, bit_depth: int) -> None:
        from fusedsim.families.vmaf import features as registry

        self.features, self.extract, self.device = features, extract, device
        self.session = None
        if extract is registry.extract:
            from fusedsim.families.vmaf.session import FeatureSession

            self.session = FeatureSession(features, bit_depth)
            self.registry = registry

    def push(self, ref_batch: FrameBatch, dist_batch: FrameBatch) -> Metrics:
        if self.session is None:
            return _extract_batch(self.features, self.extract, ref_batch, dist_batch, self.device)
        ref_planes, dist_planes = self.registry.device_planes(ref_batch, dist_batch, self.device)
        return self.registry.to_numpy(self.session.push(ref_planes, dist_planes))

    def flush(self) -> Metrics:
        return {} if self.session is None else self.registry.to_numpy(self.session.flush())


def _read_ahead(batches: Iterator) -> Iterator:
    """Yield the items of ``batches`` while a background thread already reads the next one (at most two batches
    of a clip are alive at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as reader:
        pending = reader.submit(next, batches, None)
        while True:
            item = pending.result()
            if item is None:
                return
            pending = reader.submit(next, batches, None)
            yield item
            del item


def _check_batch_pair(ref: VideoReader, dist: VideoReader, ref_batch: FrameBatch | None,
                      dist_batch: FrameBatch | None, done: int, frames: int | None) -> None:
    """Both clips gave a batch of the same length; else name the clip that ended first."""
    if ref_batch is not None and dist_batch is not None and ref_batch.n == dist_batch.n:
        return
    n_r = done + (ref_batch.n if ref_batch is not None else 0)
    n_d = done + (dist_batch.n if dist_batch is not None else 0)
    role, reader = ("reference", ref) if n_r < n_d else ("distorted", dist)
    need = f"the {frames} frames asked for" if frames is not None else "as many frames as the other clip"
    raise ValueError(f"{role} {reader.path} ended after {min(n_r, n_d)} frames; it needs {need}")


def _extract_batch(features: Sequence[FeatureRequest], extract: Extract, ref_batch: FrameBatch,
                   dist_batch: FrameBatch, device: str) -> Metrics:
    """One batch's values of every feature from a stand-in ``extract``, in feature order."""
    import numpy as np

    values: Metrics = {}
    for request in features:
        feature = request.extractor
        out = extract(feature, ref_batch, dist_batch, device=device)
        _check_extract_output(feature, out, ref_batch.n)
        for name, column in out.items():
            if name in values:
                raise RuntimeError(f"metric {name!r} is produced by more than one feature")
            values[name] = np.asarray(column, dtype=np.float64).reshape(-1)
    return values


def _append_columns(columns: dict[str, list[np.ndarray]], batch: Metrics) -> None:
    """Add a batch's values to the columns (a temporal feature's values may lag its batch)."""
    for name, values in batch.items():
        columns.setdefault(name, []).append(values)


def finish_columns(columns: dict[str, list[Any]], frames: int) -> Metrics:
    """The columns joined, each checked to hold one value per frame."""
    import numpy as np

    out = {}
    for name, parts in columns.items():
        out[name] = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts])
        if out[name].shape[0] != frames:
            raise RuntimeError(f"metric {name!r} has {out[name].shape[0]} values for {frames} frames")
    return out


def _check_extract_output(feature: str, out: Any, n: int) -> None:
    import numpy as np

    if not isinstance(out, dict):
        raise RuntimeError(f"feature {feature!r} returned {type(out).__name__}, expected a dict of per-frame arrays")
    missing = [m for m in EXPECTED_METRICS.get(feature, ()) if m not in out]
    if missing:
        got = ", ".join(out) or "nothing"
        raise RuntimeError(f"feature {feature!r} did not produce {', '.join(missing)} (got {got})")
    for name, values in out.items():
        shape = np.shape(values)
        if shape != (n,):
            raise RuntimeError(f"feature {feature!r} returned {name} with shape {shape}, expected ({n},)")


def _check_frames_done(ref: VideoReader, done: int, frames: int | None) -> None:
    if done == 0:
        raise ValueError(f"no frames to compare: {ref.path} is empty")
    if frames is not None and done < frames:
        raise ValueError(f"--frames {frames}: both clips ended after {done} frames")
