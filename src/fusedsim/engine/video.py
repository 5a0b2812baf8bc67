"""Every image metric of the registry, and VMAF, per frame of a clip pair: :func:`score_video`.

Frames come from :func:`fusedsim.io.clip_pair.open_pair` in batches on the scoring device, are converted to
R'G'B' there (:mod:`fusedsim.io.yuv_rgb`) and scored by the engine's :class:`~fusedsim.engine.scorer.Scorer` as a
group (:meth:`~fusedsim.engine.scorer.Scorer.submit_group`: each perceptual metric scores a batch of frame pairs in
one call on a GPU, the others pair by pair), one batch queued ahead of reading the last one's values back. VMAF
(``"vmaf"``, model ``vmaf_v0.6.1``; ``"vmaf_neg"``) reads the luma planes as they are, through
:class:`~fusedsim.families.vmaf.VmafStream`.

RGB for the metrics (``rgb``): ``"uint8"`` gives them 8-bit codes (the perceptual metrics' exact paths, the
numbers their reference tools give on the frames saved as 8-bit PNG), ``"float"`` float32 in [0, 1] (no rounding;
for clips above 8 bits), ``"auto"`` uint8 when both clips are 8-bit, else float.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on use: the CLI's parser reads VMAF_MODELS without torch
    import numpy as np
    import torch

    from fusedsim.io.clip_pair import ClipPair

__all__ = ["POOLS", "VMAF_MODELS", "VideoScores", "pool_column", "score_pair", "score_video"]

#: ``--metric`` names scored by VMAF models (not image metrics): name -> built-in model
VMAF_MODELS = {"vmaf": "vmaf_v0.6.1", "vmaf_neg": "vmaf_v0.6.1neg"}
#: pooled statistics of each column
POOLS = ("mean", "harmonic_mean", "min", "max", "p1", "p5", "p10")
_RGB_FORMS = ("auto", "uint8", "float")


@dataclass
class VideoScores:
    """Per-frame values of a clip pair: ``ref_index``/``dist_index`` (clip frame numbers), ``columns`` (name ->
    float64 array, one value per frame pair; ``metric`` or ``metric.field``), ``higher_is_better`` per column,
    ``pooled`` (name -> :data:`POOLS` statistics), ``clip`` (name -> one value for the whole clip: ColorVideoVDP's
    temporal JOD, whose per-frame column is the running JOD and has no pooled statistics), ``notes`` (what the
    comparison had to report), ``info`` (the clips, decoders and colour conversions), ``seconds`` (wall time of the
    scoring)."""

    ref_index: list[int]
    dist_index: list[int]
    columns: dict[str, np.ndarray]
    higher_is_better: dict[str, bool]
    pooled: dict[str, dict[str, float]]
    clip: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def frames(self) -> int:
        return len(self.ref_index)

    @property
    def fps(self) -> float | None:
        return self.frames / self.seconds if self.seconds > 0 else None


def pool_column(values: np.ndarray, higher_is_better: bool = True) -> dict[str, float]:
    """Pooled statistics of one column: mean, harmonic mean (libvmaf's ``n / sum(1 / (x + 1)) - 1``), min, max,
    and ``pN``: the value N% of the frames are worse than (a low percentile when higher is better, a high one
    when lower is better; numpy's linear interpolation between ranks)."""
    import numpy as np

    from fusedsim.families.vmaf.pipeline import pool

    out = pool(values)
    pooled = {"mean": out["mean"], "harmonic_mean": out["harmonic_mean"], "min": out["min"], "max": out["max"]}
    finite = np.asarray(values, dtype=np.float64)
    for q in (1, 5, 10):
        pooled[f"p{q}"] = float(np.percentile(finite, q if higher_is_better else 100 - q))
    return pooled


def split_metrics(metrics: Sequence[str] | str) -> tuple[list[str], list[str]]:
    """(image metric names, VMAF model names) of ``metrics`` (names, or comma-separated strings)."""
    from fusedsim.metrics.registry import get_metric

    names = [metrics] if isinstance(metrics, str) else list(metrics)
    names = [n.strip() for item in names for n in str(item).split(",") if n.strip()]
    if not names:
        raise ValueError("metrics must name at least one metric")
    image, vmaf = [], []
    for name in names:
        if name.lower() in VMAF_MODELS:
            vmaf.append(name.lower())
            continue
        spec = get_metric(name)
        if spec.kind not in ("image", "srgb"):
            raise ValueError(f"metrics: {spec.name} is a {spec.kind} metric; fusedsim video scores image metrics "
                             f"per frame and VMAF ({', '.join(VMAF_MODELS)}); libvmaf's features are in "
                             "fusedsim vmaf --feature")
        if spec.name not in image:
            image.append(spec.name)
    return image, list(dict.fromkeys(vmaf))


def _frame_image(pixels: torch.Tensor, form: str, path: Path) -> Any:
    from fusedsim.io.images import ImageData

    if form == "uint8":
        return ImageData(path=path, pixels=pixels, bit_depth=8, channels="RGB")
    # float32 in [0, 1] as a 16-bit image: the engine divides by 65535 again (within an ulp of the input)
    return ImageData(path=path, pixels=pixels * 65535.0, bit_depth=16, channels="RGB")


class _ImageColumns:
    """The image metrics of a batch through the Scorer, one batch in flight."""

    def __init__(self, metrics: list[str], device: torch.device, params: Mapping[str, Mapping[str, Any]] | None,
                 memory: str) -> None:
        from fusedsim.engine.scorer import Scorer

        self.scorer = Scorer(metrics, device=device, memory=memory, params=params, context="batch")
        self.columns: dict[str, list[float]] = {}
        self.backends: set[str] = set()

    def submit(self, refs: list[Any], dists: list[Any], frames: list[tuple[int, int]]) -> list[Any]:
        pending = self.scorer.submit_group(list(zip(refs, dists)))
        for item, (r, d) in zip(pending, frames):
            if isinstance(item, Exception):
                raise ValueError(f"frame pair (ref {r}, dist {d}): {item}") from item
        return pending

    def collect(self, pending: list[Any]) -> None:
        for item in pending:
            result = item.result()
            self.backends.update(result.backends.values())
            for metric, value in result.values.items():
                if isinstance(value, dict):
                    for name, v in value.items():
                        self.columns.setdefault(f"{metric}.{name}", []).append(v)
                else:
                    self.columns.setdefault(metric, []).append(value)


def score_video(ref: str | os.PathLike, dist: str | os.PathLike, metrics: Sequence[str] | str = ("ssimulacra2",), *,
                device: torch.device | str = "auto", decoder: str = "auto", rgb: str = "auto",
                batch_frames: int = 8, params: Mapping[str, Mapping[str, Any]] | None = None, memory: str = "auto",
                cvvdp: str = "video", fps: float | None = None, cvvdp_heatmap: str | os.PathLike | None = None,
                heatmap_type: str = "supra-threshold", progress: Callable[[int], None] | None = None,
                **selection: Any) -> VideoScores:
    """Score ``metrics`` (registry names or aliases, ``"vmaf"``, ``"vmaf_neg"``) on every compared frame pair of
    the clips ``ref`` and ``dist``.

    ``selection`` takes :func:`~fusedsim.io.clip_pair.open_pair`'s options (``start``, ``end``, ``every``,
    ``frames``, ``encoded_offset``, ``frame_skip_ref``, ``frame_skip_dist``, ``crop``, ``crop_ref``,
    ``crop_dist``, ``scale``, ``ignore_fps``, ``threads``, ``width``/``height``/``pix_fmt`` for raw YUV).
    ``rgb``: see the module docstring. ``params``: ``{metric: {name: value}}`` as the Scorer takes them.
    ``cvvdp``: ``"video"`` scores ColorVideoVDP with its temporal model on the compared frames at the clips' frame
    rate (``fps`` overrides it; divided by ``every``): one JOD per clip in :attr:`VideoScores.clip` and the running
    JOD per frame (:mod:`fusedsim.engine.video_cvvdp`); ``"frames"`` scores each frame pair as a still image.
    ``cvvdp_heatmap``: a video path (``.mp4``, ``.mkv``, ``.mov``, ``.webm``) for the temporal model's heat maps
    drawn over the distorted frames (``heatmap_type``: ``threshold``, ``supra-threshold`` or ``raw``, as pycvvdp).
    ``progress(n)`` is called with the frames of each scored batch.
    """
    from fusedsim.io.clip_pair import open_pair

    image_metrics, _ = split_metrics(metrics)
    with open_pair(ref, dist, device=device, decoder=decoder, planes=("y", "u", "v") if image_metrics else ("y",),
                   **selection) as pair:
        return score_pair(pair, metrics, rgb=rgb, batch_frames=batch_frames, params=params, memory=memory,
                          cvvdp=cvvdp, fps=fps, cvvdp_heatmap=cvvdp_heatmap, heatmap_type=heatmap_type,
                          progress=progress)


def score_pair(pair: ClipPair, metrics: Sequence[str] | str = ("ssimulacra2",), *, rgb: str = "auto",
               batch_frames: int = 8, params: Mapping[str, Mapping[str, Any]] | None = None, memory: str = "auto",
               cvvdp: str = "video", fps: float | None = None, cvvdp_heatmap: str | os.PathLike | None = None,
               heatmap_type: str = "supra-threshold", progress: Callable[[int], None] | None = None) -> VideoScores:
    """:func:`score_video` on a pair already opened by :func:`~fusedsim.io.clip_pair.open_pair` (on its device;
    image metrics need it opened with all planes)."""
    import time

    import numpy as np

    from fusedsim.metrics.registry import get_metric

    from fusedsim.engine.video_cvvdp import CVVDP_MODES, TemporalCVVDP, clip_frame_rate

    if rgb not in _RGB_FORMS:
        raise ValueError(f"rgb must be one of {', '.join(_RGB_FORMS)}; got {rgb!r}")
    if cvvdp not in CVVDP_MODES:
        raise ValueError(f"cvvdp must be one of {', '.join(CVVDP_MODES)}; got {cvvdp!r}")
    image_metrics, vmaf_names = split_metrics(metrics)
    temporal = rate = None
    cvvdp_params = (params or {}).get("cvvdp")
    if cvvdp == "video" and "cvvdp" in image_metrics:
        image_metrics.remove("cvvdp")
        rate = clip_frame_rate(pair.ref.fps, fps, pair.plan.ref_indices)
        params = {k: v for k, v in (params or {}).items() if k != "cvvdp"}
    if cvvdp_heatmap is not None and rate is None:
        raise ValueError("cvvdp_heatmap draws the temporal ColorVideoVDP's maps: add the cvvdp metric, with "
                         "cvvdp='video'")
    if cvvdp_heatmap is not None:
        _refuse_input_as_output(cvvdp_heatmap, pair)
    if (image_metrics or rate) and pair.planes == ("y",):
        raise ValueError("image metrics read R'G'B': open the pair with planes=('y', 'u', 'v')")
    start_time = time.perf_counter()
    form = rgb if rgb != "auto" else ("uint8" if pair.ref.fmt.bit_depth == pair.dist.fmt.bit_depth == 8
                                       else "float")
    if vmaf_names and pair.ref.fmt.bit_depth != pair.dist.fmt.bit_depth:
        raise ValueError(f"vmaf: the clips' bit depths differ ({pair.ref.fmt.bit_depth} and "
                         f"{pair.dist.fmt.bit_depth}); VMAF compares luma codes of one bit depth")
    refs = pair.plan.ref_indices
    if vmaf_names and any(b - a != 1 for a, b in zip(refs, refs[1:])):
        raise ValueError("vmaf: VMAF's motion feature compares each reference frame with the one before it, so it "
                         "needs consecutive frames; every > 1 (--every) leaves gaps: score VMAF with every=1")
    images = _ImageColumns(image_metrics, pair.device, params, memory) if image_metrics else None
    stream = _vmaf_stream(vmaf_names, pair.ref.fmt.bit_depth) if vmaf_names else None
    vmaf_parts: dict[str, list[np.ndarray]] = {}
    if rate is not None:
        temporal = TemporalCVVDP(cvvdp_params, rate, cvvdp_heatmap, heatmap_type)
    try:
        _score_batches(pair, batch_frames, form, stream, vmaf_parts, images, temporal, progress)
    except BaseException:
        if temporal is not None:
            temporal.abort()  # no half-written heat-map video
        raise
    columns: dict[str, np.ndarray] = {}
    better: dict[str, bool] = {}
    if images is not None:
        for name, values in images.columns.items():
            columns[name] = np.asarray(values, dtype=np.float64)
            better[name] = get_metric(name.partition(".")[0]).higher_is_better
    for name in vmaf_names:
        columns[name] = np.concatenate(vmaf_parts[name])
        better[name] = True
    pooled = {name: pool_column(values, better[name]) for name, values in columns.items()}
    clip: dict[str, float] = {}
    info = _info(pair, form, images)
    if temporal is not None:
        columns["cvvdp"], clip["cvvdp"] = temporal.finish()  # closes the heat-map video
        better["cvvdp"] = True
        info["cvvdp"] = temporal.describe()
    return VideoScores(ref_index=pair.plan.ref_indices, dist_index=pair.plan.dist_indices, columns=columns,
                       higher_is_better=better, pooled=pooled, clip=clip, notes=list(pair.notes), info=info,
                       seconds=time.perf_counter() - start_time)


def _refuse_input_as_output(path: str | os.PathLike, pair: ClipPair) -> None:
    """ValueError when ``path`` is one of the pair's clips (the same file, also through a link): writing it would
    destroy that input."""
    for role, clip in (("reference", pair.ref.path), ("distorted", pair.dist.path)):
        try:
            same = os.path.samefile(path, clip)
        except OSError:  # one of them does not exist (yet): not the same file
            same = False
        if same:
            raise ValueError(f"cvvdp_heatmap {path} is the {role} clip {clip} (the same file); writing it would "
                             "destroy that input: choose another path")


def _score_batches(pair: ClipPair, batch_frames: int, form: str, stream: Any, vmaf_parts: dict[str, list[Any]],
                   images: _ImageColumns | None, temporal: Any, progress: Callable[[int], None] | None) -> None:
    """Every batch of the pair through VMAF (``stream``), the image metrics (one batch in flight) and the temporal
    ColorVideoVDP."""
    in_flight: list[Any] | None = None
    for batch in pair.batches(batch_frames):
        if stream is not None:
            for name, values in stream.push(batch.ref.y, batch.dist.y).items():
                vmaf_parts.setdefault(name, []).append(values)
        if images is not None or temporal is not None:
            ref_rgb, dist_rgb = batch.rgb("ref", form), batch.rgb("dist", form)
        if temporal is not None:
            temporal.push(ref_rgb, dist_rgb)
        if images is not None:
            refs = [_frame_image(ref_rgb[i:i + 1], form, Path(f"{pair.ref.path}#frame{r}"))
                    for i, r in enumerate(batch.ref_index)]
            dists = [_frame_image(dist_rgb[i:i + 1], form, Path(f"{pair.dist.path}#frame{d}"))
                     for i, d in enumerate(batch.dist_index)]
            submitted = images.submit(refs, dists, list(zip(batch.ref_index, batch.dist_index)))
            if in_flight is not None:  # the previous batch's values, read back while this one computes
                images.collect(in_flight)
            in_flight = submitted
        if progress is not None:
            progress(batch.n)
    if images is not None and in_flight is not None:
        images.collect(in_flight)
    if stream is not None:
        for name, values in stream.flush().items():
            vmaf_parts.setdefault(name, []).append(values)


def _vmaf_stream(names: list[str], bit_depth: int) -> Any:
    from fusedsim.families.vmaf.score_api import VmafStream

    models = [f"version={VMAF_MODELS[n]}:name={n}" for n in names]
    return VmafStream(bit_depth, model=models)


def _info(pair: Any, form: str, images: _ImageColumns | None) -> dict[str, Any]:
    def side(s: Any) -> dict[str, Any]:
        fps = float(s.fps) if s.fps else None
        return {"path": str(s.path), "kind": s.kind, "format": s.fmt.describe(), "fps": fps,
                "frames": s.frame_count, "decoder": s.decoder, "colour": s.colour.describe(),
                "size": list(s.size)}

    out = {"ref": side(pair.ref), "dist": side(pair.dist), "rgb": form, "device": str(pair.device)}
    if images is not None:
        out["backends"] = sorted(images.backends)
    return out
