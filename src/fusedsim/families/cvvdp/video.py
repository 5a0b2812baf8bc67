"""ColorVideoVDP on video (pycvvdp 0.5.7): a clip, a batch of clips or a stream of frames, in JOD.

The algorithm is :mod:`fusedsim.families.cvvdp.video_twin`. :class:`CVVDPVideoStream` takes the frames of one clip
(or of N clips of the same size, scored together) block by block: each block goes through the display model, the
temporal filters over a ring holding the L - 1 previous frames of each image (L = 2 ceil(fps / 8) + 1 taps), and the
per-frame band pipeline with the block's frames as the batch; only the per-frame pooled differences (4 channels x
bands per frame) are kept, so memory is bounded in the clip's length. :func:`cvvdp_video` scores whole tensors or
frame iterators with it, and :func:`score_clip` is the entry point for one decoded clip.

One reference, several distorted clips (encodes of one source): a reference of one clip (1, T, 3, H, W) against
distorted clips (K, T, 3, H, W) is the video form of the cached reference. The reference's display model, temporal
filters and Gaussian pyramid are computed once per block and shared by the K clips (on the GPU; the CPU twin
repeats the reference per clip), with the same JODs as K separate calls.

Backends: on CUDA tensors every step is a registered op with a Triton kernel: for uint8 frames the display model
and the temporal filters are one kernel (``cvvdp_temporal_codes``) over a ring of codes, for float frames the
display model (``cvvdp_linear_dkl``) then the filters (``cvvdp_temporal``) over a ring of DKL frames; per band the
pyramid reductions (``cvvdp_reduce``), both sides' four-channel contrast, CSF and masking input
(``cvvdp_video_pair_band``), the masking blur (``cvvdp_video_masker_vblur``) and the masking with the per-row
pooled sums (``cvvdp_video_band_pool``); the baseband and the pooling are PyTorch. On the CPU every step is the
twin. Both compute in float32, as pycvvdp does. A clip of one frame is a still image, scored by
:func:`fusedsim.cvvdp`'s image path (as pycvvdp does).

Peak memory at 1080p with the default blocks (16 frames on a GPU, 8 on the CPU): the block's temporal channels of
both clips (2 x 16 x 4 planes), one band buffer (16 x 8 planes at the finest band) and the ring (L - 1 frames of
codes or DKL per clip), about 3 GB on a GPU (3 069 MiB measured on an H200), whatever the clip's length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch

import fusedsim.families.cvvdp.twin as spec
from fusedsim.core.state import cached
from fusedsim.families.cvvdp import ops
from fusedsim.families.cvvdp.data import CVVDPDisplay, cvvdp_params
from fusedsim.families.cvvdp.inputs import check_display_input
from fusedsim.families.cvvdp.video_twin import (cvvdp_frame_quality_ref, cvvdp_temporal_filters, cvvdp_video_pool_ref,
                                               cvvdp_video_running_jod_ref)

__all__ = ["CVVDPVideoStream", "cvvdp_video", "score_clip"]

_NAME = "cvvdp"
#: Pixels (frames x height x width, all clips) a block of frames holds at most when a whole clip is given: on the
#: CPU about 0.7 GiB of band buffers at 1080p in float32 (8 frames); twice that on a GPU, where blocks of 16-32
#: frames ran 6-9 % faster than 8 on an H200 (fewer launches; benchmarks/README.md, ColorVideoVDP on video).
BLOCK_PIXELS = 1 << 24
BLOCK_PIXELS_GPU = 1 << 25


def _frames(x: Any, name: str, display: CVVDPDisplay) -> torch.Tensor:
    """A block of frames as (N, B, 3, H, W): (N, B, 3, H, W), (B, 3, H, W) of one clip, or one frame (3, H, W);
    HDR displays' input checked as for images (:func:`.inputs.check_display_input`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{_NAME}: {name} frames must be torch tensors; got {type(x).__name__}")
    if x.dim() == 3:
        x = x.unsqueeze(0)
    if x.dim() == 4:
        x = x.unsqueeze(0)
    if x.dim() != 5 or x.shape[2] != 3:
        raise ValueError(f"{_NAME}: {name} must be frames (N, T, 3, H, W), (T, 3, H, W) or (3, H, W) of sRGB; got "
                         f"shape {tuple(x.shape)}")
    check_display_input(x, name, display)
    if x.dtype != torch.uint8 and not x.dtype.is_floating_point:
        raise TypeError(f"{_NAME}: {name} must be uint8 codes or floating values in [0, 1]; got {x.dtype}")
    if x.shape[-1] < 2 or x.shape[-2] < 2:
        raise ValueError(f"{_NAME}: {name} frames must be at least 2 x 2 px (the Laplacian pyramid needs 2 px per "
                         f"side); got {x.shape[-2]} x {x.shape[-1]}")
    return x


def _check_sides(r: torch.Tensor, d: torch.Tensor) -> None:
    """Both clips' frames alike, or one reference clip for several distorted ones."""
    shared = r.shape[0] == 1 and r.shape[1:] == d.shape[1:]
    if (r.shape != d.shape and not shared) or r.device != d.device or r.dtype != d.dtype:
        raise ValueError(f"{_NAME}: ref and dist frames must have the same shape (or ref one clip (1, T, 3, H, W) for "
                         f"dist (K, T, 3, H, W)), dtype and device; got {tuple(r.shape)} {r.dtype} on {r.device} and "
                         f"{tuple(d.shape)} {d.dtype} on {d.device}")


class CVVDPVideoStream:
    """Scores a clip (or N clips of one size together) frame block by frame block, as pycvvdp's ``predict`` on the
    whole clip.

    ``push(ref, dist)`` takes the next frames of both clips, (N, B, 3, H, W), (B, 3, H, W) or (3, H, W), sRGB uint8
    or float in [0, 1], the same shape for both and for every push, or one reference clip (1, B, 3, H, W) for K
    distorted clips (K, B, 3, H, W) (the reference's side computed once); with ``return_map`` it returns the frames'
    heat maps (N, B', 1, H, W) (pycvvdp's raw heatmap), else ``None``. The first frame is held back until a second
    one arrives (a one-frame clip is a still image), so the first push of a single frame returns no map and the
    next push returns one more. ``finish()`` returns the JOD (N,) of the whole clip; :attr:`per_frame` holds the
    pooled differences (N, T, 4, bands) of the frames so far (pycvvdp's ``Q_per_ch``, frames second).
    """

    def __init__(self, display: CVVDPDisplay, fps: float, return_map: bool = False) -> None:
        self.display = display
        self.fps = fps
        self.return_map = bool(return_map)
        self._filters_cpu = cvvdp_temporal_filters(fps)
        self._filters: torch.Tensor | None = None
        self._ring: tuple[torch.Tensor, torch.Tensor] | None = None
        self._held: tuple[torch.Tensor, torch.Tensor] | None = None
        self._shape: tuple[int, ...] | None = None
        self._q: list[torch.Tensor] = []
        self.frames = 0

    @property
    def taps(self) -> int:
        return self._filters_cpu.shape[-1]

    def push(self, ref: Any, dist: Any) -> torch.Tensor | None:
        r, d = _frames(ref, "ref", self.display), _frames(dist, "dist", self.display)
        _check_sides(r, d)
        shape = (r.shape[0], d.shape[0], *r.shape[2:], r.dtype, r.device)
        if self._shape is None:
            self._shape = shape
        elif shape != self._shape:
            raise ValueError(f"{_NAME}: frames (N ref, N dist, 3, H, W, dtype, device) = {shape} after {self._shape}: "
                             f"every push of a stream must have the clips' shape, dtype and device")
        self.frames += r.shape[1]
        if self._held is not None:
            r, d = torch.cat([self._held[0], r], dim=1), torch.cat([self._held[1], d], dim=1)
            self._held = None
        elif self._ring is None and r.shape[1] == 1:
            self._held = (r, d)  # a clip of one frame is an image: wait for the second frame
            return None
        return self._process(r, d)

    def _dkl(self, x: torch.Tensor) -> torch.Tensor:
        n, b, _, h, w = x.shape
        flat = x.reshape(n * b, 3, h, w)
        if flat.dtype != torch.uint8:
            flat = flat.float()
        return ops.display_model(flat, self.display).view(n, b, 3, h, w)

    def _temporal(self, x: torch.Tensor, which: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Temporal channels (N, B, 4, H, W) of a block of frames, and the ring's next content: uint8 codes where
        the display model runs fused with the filters (Triton), else the frames' DKL."""
        if self._filters is None:
            self._filters = self._filters_cpu.to(x.device)
        codes = x.dtype == torch.uint8 and ops.cvvdp_temporal_codes.backend_for(x, compiled_cpu=False) == "triton"
        frames = x if codes else self._dkl(x)
        history = self._ring[which] if self._ring is not None else frames[:, :1].expand(-1, self.taps - 1, -1, -1, -1)
        window = torch.cat([history, frames], dim=1)
        ring = window[:, -(self.taps - 1):].contiguous()
        if codes:
            disp = self.display
            xyz = [v for row in disp.rgb2xyz for v in row]
            return ops.cvvdp_temporal_codes(window, self._filters, disp.peak_luminance, disp.black_level,
                                            disp.reflected, disp.exposure, xyz), ring
        return ops.cvvdp_temporal(window, self._filters), ring

    def _process(self, r: torch.Tensor, d: torch.Tensor) -> torch.Tensor | None:
        n, b, _, h, w = d.shape
        test, test_ring = self._temporal(d, 0)
        ref, ref_ring = self._temporal(r, 1)
        self._ring = (test_ring, ref_ring)
        if _fused(test):  # a shared reference stays one clip: its pyramid is built once for the n clips
            out = _frame_quality_fused(test.view(n * b, 4, h, w), ref.view(r.shape[0] * b, 4, h, w),
                                       self.display.ppd, self.return_map)
        else:
            ref = ref.expand(n, -1, -1, -1, -1).reshape(n * b, 4, h, w)  # a shared reference repeated per clip
            out = cvvdp_frame_quality_ref(test.view(n * b, 4, h, w), ref, self.display.ppd, self.return_map)
        q, dmap = out if self.return_map else (out, None)
        self._q.append(q.view(n, b, *q.shape[1:]))
        return dmap.view(n, b, 1, h, w) if dmap is not None else None

    @property
    def per_frame(self) -> torch.Tensor:
        """Pooled differences (N, T, 4, bands) of every frame scored so far."""
        if not self._q:
            raise ValueError(f"{_NAME}: no video frames scored yet")
        return torch.cat(self._q, dim=1)

    def finish(self) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """JOD (N,) of the clip(s); a clip of one frame is scored as a still image (with ``return_map`` the pair
        (JOD, its heat map (N, 1, 1, H, W)))."""
        if self._held is not None:
            import fusedsim.families.cvvdp.api as api  # the image path (api imports this module lazily)

            r, d = self._held
            ref_frame = r[:, 0].expand(d.shape[0], -1, -1, -1)  # a shared reference: one per distorted clip
            out = api._cvvdp_display_image(ref_frame, d[:, 0], self.display, self.return_map)
            if self.return_map:
                return out[0], out[1].unsqueeze(1)
            return out
        if self.frames == 0:
            raise ValueError(f"{_NAME}: the clips have no frames")
        return cvvdp_video_pool_ref(self.per_frame)

    def running_jod(self) -> torch.Tensor:
        """JOD (N, T) of every prefix of the clip(s) scored so far: element t is the JOD of frames 0..t with the
        temporal model (the filters are causal, so it is the clip cut after frame t, up to float32 summation
        order); the last element is :meth:`finish`'s value. A clip of one frame has its still-image JOD, as
        pycvvdp gives; in a longer clip, element 0 is the temporal model on one frame."""
        if self._held is not None or self.frames == 0:
            jod = self.finish()
            return (jod[0] if isinstance(jod, tuple) else jod).reshape(-1, 1)
        q = self.per_frame
        running = cvvdp_video_running_jod_ref(q)
        running[:, -1] = cvvdp_video_pool_ref(q)  # the whole clip as finish() sums it
        return running


def _fused(x: torch.Tensor) -> bool:
    """Whether the frames' bands run in the fused kernels: where the backend is Triton (GPU tensors)."""
    return ops.cvvdp_video_pair_band.backend_for(x, compiled_cpu=False) == "triton"


@cached(maxsize=8)
def _baseband_lut(device: torch.device) -> torch.Tensor:
    like = torch.empty(0, dtype=torch.float32)
    return spec.cvvdp_sensitivity_lut_ref(spec._BASEBAND_RHO, like, spec.TEMPORAL_LUTS).to(device)


def _baseband_contrast(level: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The baseband's contrast and mean background per frame, as :func:`spec.cvvdp_contrast_pyramid_ref`."""
    bkg = level[:, :1].clamp(min=0.01).mean(dim=(-2, -1), keepdim=True)
    return (level / bkg).clamp(max=1000.0), bkg


@cached(maxsize=64)
def _pixels(height: int, width: int, n_levels: int, device: torch.device) -> torch.Tensor:
    sizes = []
    for _ in range(n_levels):
        sizes.append(height * width)
        height, width = (height + 1) // 2, (width + 1) // 2
    return torch.tensor(sizes, dtype=torch.float32, device=device)


def _frame_quality_fused(test: torch.Tensor, ref: torch.Tensor, ppd: float, return_map: bool = False):
    """:func:`cvvdp_frame_quality_ref` through the fused kernels: per band the pyramid reductions, one kernel for
    both sides' contrast, CSF and masker input, the masking blur's vertical pass and one kernel for its horizontal
    pass, the masking and the per-row pooled sums; bands made and freed one at a time. The baseband (a few pixels)
    and the pooling are the twin's PyTorch code. ``ref`` holds the frames of ``test`` (M, 4, H, W), or of one clip
    when ``test`` holds K clips' frames (K x M', 4, H, W), clip after clip: the reference's levels are then made
    once and every clip's band is scored against them in the same launches."""
    params = cvvdp_params()
    freqs = spec.cvvdp_bands(ref.shape[-2], ref.shape[-1], ppd)
    clips = test.shape[0] // ref.shape[0]
    ref_g, test_g = ref, test
    sums: list[torch.Tensor] = []
    diffs: list[torch.Tensor] = []
    for b in range(len(freqs) - 1):
        ref_next, test_next = ops.cvvdp_reduce(ref_g), ops.cvvdp_reduce(test_g)
        # every clip's frames in one launch per kernel: the pair kernel reads reference frame i % M for frame i
        band = ops.cvvdp_video_pair_band(ref_g, ref_next, test_g, test_next, freqs[b], 2.0 if b > 0 else 1.0)
        blur = spec.masking_blur_applies(*band.shape[-2:])
        masker = ops.cvvdp_video_masker_vblur(band[:, :4]) if blur else band[:, :4]
        out = ops.cvvdp_video_band_pool(masker, band, blur, return_map)
        del band, masker
        sums.append(out[..., -1].sum(dim=-1))
        if return_map:
            diffs.append(out[..., :-1])
        ref_g, test_g = ref_next, test_next
    ref_base, bkg = _baseband_contrast(ref_g)
    test_base, _ = _baseband_contrast(test_g)
    if clips > 1:
        ref_base, bkg = ref_base.repeat(clips, 1, 1, 1), bkg.repeat(clips, 1, 1, 1)
    d = (test_base - ref_base).abs() * spec.cvvdp_sensitivity_from_lut_ref(torch.log10(bkg),
                                                                           _baseband_lut(bkg.device), params)
    beta = spec._t(params.beta, d)
    sums.append(spec.safe_pow(d, beta).sum(dim=(-2, -1)))
    pixels = _pixels(ref.shape[-2], ref.shape[-1], len(sums), d.device)
    q = spec.safe_pow(torch.stack(sums, dim=-1) / pixels, 1 / beta)
    if not return_map:
        return q
    diffs.append(d)
    return q, spec.cvvdp_heatmap_ref(diffs, params, expand=lambda x, size: ops.cvvdp_expand(x, *size))


def _blocks(x: torch.Tensor, size: int) -> Iterator[torch.Tensor]:
    for t in range(0, x.shape[1], size):
        yield x[:, t:t + size]


def _block_frames(shape: tuple[int, ...], device: torch.device) -> int:
    n, h, w = shape[0], shape[-2], shape[-1]
    return max(1, (BLOCK_PIXELS_GPU if device.type == "cuda" else BLOCK_PIXELS) // (n * h * w))


def cvvdp_video(ref: Any, dist: Any, display: CVVDPDisplay, fps: float, return_map: bool = False,
                frames_per_block: int | None = None):
    """JOD (N,) of clips ``ref``, ``dist`` (N, T, 3, H, W), or of two iterables of frames or frame blocks (as
    :meth:`CVVDPVideoStream.push` takes them); with ``return_map`` also the heat-map video (N, T, 1, H, W) (kept in
    memory: for long clips use the stream and consume each block's map)."""
    if frames_per_block is not None and (isinstance(frames_per_block, bool) or not isinstance(frames_per_block, int)
                                         or frames_per_block < 1):
        raise ValueError(f"{_NAME}: frames_per_block must be a positive int; got {frames_per_block!r}")
    stream = CVVDPVideoStream(display, fps, return_map)
    if isinstance(ref, torch.Tensor) and isinstance(dist, torch.Tensor):
        r, d = _frames(ref, "ref", display), _frames(dist, "dist", display)
        _check_sides(r, d)
        size = frames_per_block or _block_frames(tuple(d.shape), d.device)
        pairs: Iterable = zip(_blocks(r, size), _blocks(d, size))
    elif isinstance(ref, torch.Tensor) or isinstance(dist, torch.Tensor):
        raise TypeError(f"{_NAME}: ref and dist must both be tensors or both be iterables of frames")
    else:
        pairs = _zip_frames(ref, dist)
    maps = []
    with torch.no_grad():
        for r_block, d_block in pairs:
            m = stream.push(r_block, d_block)
            if m is not None:
                maps.append(m.to(torch.float32))
        out = stream.finish()
    if not return_map:
        return out
    if isinstance(out, tuple):
        return out
    return out, torch.cat(maps, dim=1)


def _zip_frames(ref: Iterable, dist: Iterable) -> Iterator[tuple[Any, Any]]:
    """Pairs of frames from two iterables, refusing clips of different lengths."""
    sentinel = object()
    r_it, d_it = iter(ref), iter(dist)
    while True:
        r, d = next(r_it, sentinel), next(d_it, sentinel)
        if r is sentinel and d is sentinel:
            return
        if r is sentinel or d is sentinel:
            raise ValueError(f"{_NAME}: ref and dist have different numbers of frames")
        yield r, d


def score_clip(ref_frames: Iterable, dist_frames: Iterable, *, fps: float, display: str = "standard_4k",
               **display_params: Any) -> float:
    """JOD of one decoded clip: ``ref_frames`` and ``dist_frames`` yield frames (3, H, W) or blocks (B, 3, H, W) of
    sRGB (uint8 or float in [0, 1]) in display order. The entry point for ``fusedsim video --metric cvvdp``."""
    import fusedsim.families.cvvdp.api as api

    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"{_NAME}: fps must be a positive finite number; got {fps!r}")
    jod = cvvdp_video(ref_frames, dist_frames, api._display(display, display_params), float(fps))
    return float(jod.reshape(-1)[0])

