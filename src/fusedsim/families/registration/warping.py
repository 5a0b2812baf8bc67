"""Public warping API: ``warp`` (I(A·x + u(x)) without materialising the sampling grid), ``compose``
(v + u∘(A·x + v)) and ``scaling_and_squaring`` (the exponential of a stationary velocity field).

Conventions are ``F.affine_grid`` / ``F.grid_sample``'s (and FireANTs'): images channel-first (B, C, H, W) or
(B, C, D, H, W); displacement and warp fields channel-last (B, H, W, 2) or (B, D, H, W, 3) in normalised
coordinates [-1, 1], last axis ordered (x, y[, z]) with x along W; affines (B, d, d+1) acting on normalised
(x, y[, z], 1). Any of image, affine and field may have batch 1 while the others have batch B.

GPU tensors run the Triton kernels (:mod:`fusedsim.families.registration.warp_kernel`), everything else the PyTorch twin
(:mod:`fusedsim.families.registration.warp_twin`); see :mod:`fusedsim.core.backend`. A call is looked up by its arguments'
metadata in a table of validated calls: only a miss validates and plans, and nothing synchronises with the device
(a sampling point with a NaN or Inf coordinate gives NaN in every channel, on every backend, rather than
raising; grid_sample's own answer differs between its CPU and CUDA kernels and between modes).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import torch

from fusedsim.core.calls import CallTable
from fusedsim.core.registry import KernelOp
from fusedsim.families.registration import ops
from fusedsim.core.validation import FLOAT_DTYPES
from fusedsim.core.backend import requested_backend

MODES = {"bilinear": 0, "trilinear": 0, "nearest": 1}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}

_CALLS = CallTable()


# ------------------------------------------------------------------------------------------------ validation
def _check_float_tensor(value: object, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    if value.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating tensor (float16, bfloat16, float32 or float64); got {value.dtype}")
    if value.numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(value.shape)}")
    return value


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
    return value


def _check_affine(affine: object, nd: int, name: str = "affine") -> torch.Tensor:
    affine = _check_float_tensor(affine, name)
    if affine.dim() != 3 or tuple(affine.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"{name} must have shape (B, {nd}, {nd + 1}) for {nd}-D data; got {tuple(affine.shape)}")
    return affine


def _check_field(field: object, nd: int, name: str) -> torch.Tensor:
    """A channel-last field (B, *S, nd) of nd spatial axes."""
    field = _check_float_tensor(field, name)
    layout = "(B, H, W, 2)" if nd == 2 else "(B, D, H, W, 3)"
    if field.dim() != nd + 2 or field.shape[-1] != nd:
        raise ValueError(f"{name} must be a channel-last field {layout} for {nd}-D data; got {tuple(field.shape)}")
    return field


def _common_batch(named: Sequence[tuple[str, torch.Tensor]]) -> int:
    batch = max(t.shape[0] for _, t in named)
    for name, t in named:
        if t.shape[0] not in (1, batch):
            sizes = ", ".join(f"{n} {u.shape[0]}" for n, u in named)
            raise ValueError(f"batch sizes must be equal or 1; got {sizes} ({name} cannot broadcast to {batch})")
    return batch


def _check_devices(named: Sequence[tuple[str, torch.Tensor]]) -> None:
    device = named[0][1].device
    for name, t in named[1:]:
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but {named[0][0]} is on {device}")


def _lattice(out_shape: object, nd: int, grid: torch.Tensor | None, image: torch.Tensor) -> tuple[int, ...]:
    """The output lattice: the grid's, else ``out_shape`` (spatial sizes, or a full (B, C, *S) shape), else the
    image's."""
    shape = None
    if out_shape is not None:
        if isinstance(out_shape, torch.Size):
            out_shape = tuple(out_shape)
        if (not isinstance(out_shape, Sequence) or isinstance(out_shape, str)
                or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in out_shape)):
            raise TypeError(f"out_shape must be a sequence of ints; got {out_shape!r}")
        if len(out_shape) not in (nd, nd + 2):
            raise ValueError(f"out_shape must hold the {nd} spatial sizes (or a full {nd + 2}-D shape) for "
                             f"{nd}-D images; got {tuple(out_shape)}")
        shape = tuple(int(s) for s in out_shape[-nd:])
        if min(shape) < 1:
            raise ValueError(f"out_shape sizes must be >= 1; got {tuple(out_shape)}")
    if grid is not None:
        lattice = tuple(grid.shape[1:-1])
        if shape is not None and shape != lattice:
            raise ValueError(f"out_shape {shape} disagrees with the grid's lattice {lattice}: the output lives on "
                             f"the grid's lattice (leave out_shape out)")
        return lattice
    return shape if shape is not None else tuple(image.shape[2:])


# --------------------------------------------------------------------------------------------------- calls
class _Call:
    """One validated call: the op with its scalars and placeholders for absent tensors; on the Triton backend
    its plan is built once (no dispatcher round trip, no autograd node when nothing needs a gradient)."""

    __slots__ = ("device_index", "op", "order", "plan", "scalars")

    def __init__(self, op: KernelOp, tensors: tuple[torch.Tensor, ...], scalars: tuple, order: Callable) -> None:
        self.op, self.scalars, self.order = op, scalars, order
        self.plan = None
        device = tensors[0].device
        self.device_index = device.index if device.type == "cuda" else None
        if op.backend_for(tensors[0], compiled_cpu=False) == "triton":
            self.plan = self.op.make_plan(tensors, scalars)

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        idx = self.device_index
        if idx is not None and idx != torch.cuda.current_device():  # Triton launches on the current device
            with torch.cuda.device(idx):
                return self._run(tensors)
        return self._run(tensors)

    def _run(self, tensors: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.plan is None:
            return self.op.reference(*tensors, *self.scalars)
        if any(t.requires_grad for t in tensors) and torch.is_grad_enabled():
            return self.op.run_plan(self.plan, *tensors)
        return self.plan.forward(*tensors)[0]


def _meta(t: object) -> tuple | None:
    if t is None:
        return ()
    if not isinstance(t, torch.Tensor):
        raise _Unkeyable
    return t.shape, t.stride(), t.dtype, t.device


class _Unkeyable(Exception):
    pass


def _empty_like(image: torch.Tensor) -> torch.Tensor:
    return image.new_empty(0)


# -------------------------------------------------------------------------------------------------- public
def warp(image: torch.Tensor, affine: torch.Tensor | None = None, grid: torch.Tensor | None = None, *,
         out_shape: Sequence[int] | None = None, is_displacement: bool = True, mode: str = "bilinear",
         padding_mode: str = "zeros", align_corners: bool = True) -> torch.Tensor:
    """Sample ``image`` at ``A·x + u(x)``: ``grid_sample(image, affine_grid(A) + u)`` without the grid.

    image: (Bi, C, H, W) or (Bi, C, D, H, W), float16/bfloat16/float32/float64.
    affine: (Ba, d, d+1) or None (identity). grid: a displacement u (Bg, *S, d), channel-last, normalised
    coordinates, or None; with ``is_displacement=False`` a full warp field φ (then ``affine`` must be None and
    the result is I(φ(x))). The output lattice S is the grid's, else ``out_shape`` (spatial sizes or a full shape),
    else the image's. Batch sizes are equal or 1. ``mode``: ``"bilinear"`` (``"trilinear"`` in 3-D) or
    ``"nearest"``; ``padding_mode``: ``"zeros"``, ``"border"`` or ``"reflection"``; ``align_corners`` as in
    grid_sample (FireANTs' default True; torch's is False).

    Returns (B, C, *S) in image.dtype, computed in float32 (float64 when any input is float64). Differentiable in
    the image, the affine and the displacement (nearest: zero coordinate gradients, as grid_sample). A point with a
    NaN or Inf coordinate (from the field or the affine) gives NaN in every channel and passes no gradient.
    """
    try:
        key = (_meta(image), _meta(affine), _meta(grid), None if out_shape is None else tuple(out_shape),
               is_displacement, mode, padding_mode, align_corners, requested_backend())
        hash(key)
    except (_Unkeyable, TypeError):
        key = None

    def build() -> _Call:
        img = _check_float_tensor(image, "image")
        if img.dim() not in (4, 5):
            raise ValueError(f"image must be (B, C, H, W) or (B, C, D, H, W); got shape {tuple(img.shape)}")
        nd = img.dim() - 2
        named = [("image", img)]
        a = None if affine is None else _check_affine(affine, nd)
        g = None if grid is None else _check_field(grid, nd, "grid")
        named += [("affine", a)] if a is not None else []
        named += [("grid", g)] if g is not None else []
        _check_devices(named)
        _common_batch(named)
        disp = _check_bool(is_displacement, "is_displacement")
        if not disp and g is None:
            raise ValueError("is_displacement=False needs grid: the full warp field to sample at")
        if not disp and a is not None:
            raise ValueError("affine must be None when is_displacement=False: grid is then the full sampling field "
                             "(compose the affine into it, or pass a displacement)")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if mode == "trilinear" and nd != 3:
            raise ValueError("mode='trilinear' is for 3-D images; use 'bilinear' for 2-D")
        if padding_mode not in PADDINGS:
            raise ValueError(f"padding_mode must be one of {', '.join(PADDINGS)}; got {padding_mode!r}")
        ac = _check_bool(align_corners, "align_corners")
        lattice = _lattice(out_shape, nd, g, img)
        empty = _empty_like(img)
        tensors = (img, empty if a is None else a, empty if g is None else g)
        scalars = (list(lattice), disp, MODES[mode], PADDINGS[padding_mode], ac)
        return _Call(ops.warp, tensors, scalars, lambda i, a_, g_: (i, empty if a_ is None else a_,
                                                                  empty if g_ is None else g_))

    call = _CALLS.get(key, build)
    if torch.compiler.is_compiling():
        return call.op(*call.order(image, affine, grid), *call.scalars)
    return call(*call.order(image, affine, grid))


def compose(u: torch.Tensor, v: torch.Tensor, affine: torch.Tensor | None = None, *, add_v: bool = True,
            align_corners: bool = True) -> torch.Tensor:
    """Warp composition ``v + u∘(A·x + v)`` (``add_v=False``: the bare ``u∘(A·x + v)``, FireANTs'
    ``warp_composer``).

    u: (Bu, *Su, d) displacement, channel-last, sampled bilinearly with zero padding on its own lattice;
    v: (Bv, *Sv, d) displacement on the output lattice; affine: (Ba, d, d+1) or None (identity). Batch sizes
    are equal or 1. Returns (B, *Sv, d) in u.dtype; differentiable in u, v and the affine.
    """
    try:
        key = (_meta(u), _meta(v), _meta(affine), add_v, align_corners, requested_backend())
        hash(key)
    except (_Unkeyable, TypeError):
        key = None

    def build() -> _Call:
        uu = _check_float_tensor(u, "u")
        if uu.dim() not in (4, 5):
            raise ValueError(f"u must be a channel-last field (B, H, W, 2) or (B, D, H, W, 3); got shape "
                             f"{tuple(uu.shape)}")
        nd = uu.dim() - 2
        uu = _check_field(uu, nd, "u")
        vv = _check_field(v, nd, "v")
        a = None if affine is None else _check_affine(affine, nd)
        named = [("u", uu), ("v", vv)] + ([("affine", a)] if a is not None else [])
        _check_devices(named)
        _common_batch(named)
        scalars = (_check_bool(add_v, "add_v"), _check_bool(align_corners, "align_corners"))
        empty = _empty_like(uu)
        return _Call(ops.compose, (uu, vv, empty if a is None else a), scalars,
                     lambda u_, v_, a_: (u_, v_, empty if a_ is None else a_))

    call = _CALLS.get(key, build)
    if torch.compiler.is_compiling():
        return call.op(*call.order(u, v, affine), *call.scalars)
    return call(*call.order(u, v, affine))


def max_squaring_steps(dtype: torch.dtype) -> int:
    """The most squarings :func:`scaling_and_squaring` takes for a velocity of ``dtype``: its significand bits.
    With more, velocity / 2**steps is below one unit in the last place of the identity grid's coordinates (|x| <= 1),
    so the first compositions only double the field, and it heads to underflow (zero: the identity, silently)."""
    return round(-math.log2(torch.finfo(dtype).eps)) + 1


def scaling_and_squaring(velocity: torch.Tensor, steps: int, *, align_corners: bool = True) -> torch.Tensor:
    """The displacement of exp(velocity): ``u = velocity / 2**steps``, then ``steps`` times ``u ← u + u∘(x + u)``
    (:func:`compose` with ``add_v=True``).

    velocity: (B, H, W, 2) or (B, D, H, W, 3), channel-last, normalised coordinates; steps: an int from 0 to
    :func:`max_squaring_steps` of the velocity's dtype (24 for float32, 53 for float64).
    Returns a displacement of the same shape and dtype; differentiable in the velocity.
    """
    v = _check_float_tensor(velocity, "velocity")
    if v.dim() not in (4, 5):
        raise ValueError(f"velocity must be a channel-last field (B, H, W, 2) or (B, D, H, W, 3); got shape "
                         f"{tuple(v.shape)}")
    _check_field(v, v.dim() - 2, "velocity")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
        raise TypeError(f"steps must be an int; got {type(steps).__name__}")
    top = max_squaring_steps(v.dtype)
    if not 0 <= steps <= top:
        raise ValueError(f"steps must lie in 0..{top} for a {str(v.dtype).removeprefix('torch.')} velocity; got "
                         f"{steps} (velocity / 2**steps would fall below the {str(v.dtype).removeprefix('torch.')} "
                         "resolution of the sampling grid, and then underflow: more squarings only add rounding)")
    u = v / (2.0 ** int(steps))
    for _ in range(int(steps)):
        u = compose(u, u, add_v=True, align_corners=align_corners)
    return u
