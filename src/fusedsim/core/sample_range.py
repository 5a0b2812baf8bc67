"""Integer samples within their bit depth: the check every integer feature runs on its inputs, and a scope in which
a caller that has checked all of a batch's planes at once (one synchronisation on a GPU) lets the features it
calls skip their own checks (one synchronisation each, which would stall the host behind the device's queue)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import torch

__all__ = ["check_sample_range", "check_sample_ranges", "sample_ranges_checked"]

_CHECKED: ContextVar[bool] = ContextVar("fusedsim_sample_ranges_checked", default=False)


def _needs_check(t: torch.Tensor, bit_depth: int) -> bool:
    return t.numel() > 0 and not (t.dtype == torch.uint8 and bit_depth >= 8
                                  or t.dtype == torch.uint16 and bit_depth >= 16)


def _bounds(t: torch.Tensor, wrapped: bool) -> tuple[torch.Tensor, bool]:
    """``(min, max)`` of ``t`` as an int64 tensor ``(2,)`` on its device, and whether negative values stand for
    samples 2**16 higher (uint16 read as int16: few torch ops take uint16)."""
    if t.dtype == torch.uint16:
        t, wrapped = t.view(torch.int16), True
    return torch.stack(torch.aminmax(t)).to(torch.int64), wrapped


def _raise_if_outside(name: str, bit_depth: int, low: int, high: int, wrapped: bool) -> None:
    top = (1 << bit_depth) - 1
    if low < 0 or high > top:
        bad = low + (1 << 16) if low < 0 and wrapped else (high if high > top else low)
        raise ValueError(f"{name} holds the sample {bad}, outside [0, {top}] for {bit_depth}-bit samples")


def check_sample_range(t: torch.Tensor, name: str, bit_depth: int, *, wrapped: bool = False) -> None:
    """A ``ValueError`` naming ``name`` and an offending sample unless every sample of ``t`` lies in
    ``[0, 2**bit_depth)``. ``wrapped``: ``t`` is int16 storage of uint16 samples (negative values are 2**16
    higher). One reduction and one synchronisation on a GPU; nothing inside :func:`sample_ranges_checked`."""
    if _CHECKED.get() or not _needs_check(t, bit_depth):
        return
    bounds, wrapped = _bounds(t, wrapped)
    low, high = bounds.tolist()
    _raise_if_outside(name, bit_depth, low, high, wrapped)


def check_sample_ranges(named: Sequence[tuple[str, torch.Tensor]], bit_depth: int) -> None:
    """:func:`check_sample_range` of every ``(name, tensor)`` (all on one device) with one synchronisation."""
    pending = [(name, *_bounds(t, False)) for name, t in named if _needs_check(t, bit_depth)]
    if not pending:
        return
    values = torch.stack([bounds for _, bounds, _ in pending]).tolist()
    for (name, _, wrapped), (low, high) in zip(pending, values):
        _raise_if_outside(name, bit_depth, low, high, wrapped)


@contextmanager
def sample_ranges_checked() -> Iterator[None]:
    """Within this block (this thread or task only) :func:`check_sample_range` returns at once: the caller has
    checked every plane the block's calls read."""
    token = _CHECKED.set(True)
    try:
        yield
    finally:
        _CHECKED.reset(token)
