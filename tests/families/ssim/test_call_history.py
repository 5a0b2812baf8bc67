"""Validation must not depend on call history: the call tables key options by type as well as value, so an option
of the wrong type (``11.0`` for ``11``, ``1`` for ``True``) is refused whether or not an equal value of the right
type was called before (issue 38)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import fusedsim
from fusedsim.core import state
from fusedsim.families.registration import compose, lncc_loss, warp

_X = torch.rand(1, 1, 32, 32)
_Y = torch.rand(1, 1, 32, 32)
_IMG = torch.rand(1, 1, 8, 8)
_FIELD = torch.zeros(1, 8, 8, 2)
_AFFINE = torch.eye(2, 3)[None]

# (good call, bad call): the bad call passes an option equal to the good one's but of another type
CASES: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
    "ssim win_size": (lambda: fusedsim.ssim(_X, _Y, win_size=11), lambda: fusedsim.ssim(_X, _Y, win_size=11.0)),
    "ssim K": (lambda: fusedsim.ssim(_X, _Y, K=(0.01, 0.03)), lambda: fusedsim.ssim(_X, _Y, K=(True, 0.03))),
    # ms_ssim's key lists K's items and then the weights': K's length must keep them apart
    "ms_ssim K and weights": (lambda: fusedsim.ms_ssim(_X, _Y, win_size=7, K=(0.01, 0.03), weights=[0.5, 0.5]),
                              lambda: fusedsim.ms_ssim(_X, _Y, win_size=7, K=(0.01, 0.03, 0.5), weights=[0.5])),
    "fused_ssim window_size": (lambda: fusedsim.fused_ssim(_X, _Y, window_size=11),
                               lambda: fusedsim.fused_ssim(_X, _Y, window_size=11.0)),
    "warp align_corners": (lambda: warp(_IMG, grid=_FIELD, align_corners=True),
                           lambda: warp(_IMG, grid=_FIELD, align_corners=1)),
    "warp out_shape": (lambda: warp(_IMG, affine=_AFFINE, out_shape=(5, 6)),
                       lambda: warp(_IMG, affine=_AFFINE, out_shape=(5.0, 6.0))),
    "compose add_v": (lambda: compose(_FIELD, _FIELD, add_v=True), lambda: compose(_FIELD, _FIELD, add_v=1)),
    "lncc kernel_size": (lambda: lncc_loss(_X, _Y, kernel_size=9), lambda: lncc_loss(_X, _Y, kernel_size=9.0)),
}


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_type_refused_in_either_order(name: str) -> None:
    good, bad = CASES[name]
    state.reset()
    fresh = _outcome(bad)
    assert fresh != "ok", f"{name}: a fresh call with the wrong type must be refused"
    assert _outcome(good) == "ok"
    assert _outcome(bad) == fresh, f"{name}: accepted after a call with an equal value of the right type"
    state.reset()
    assert _outcome(good) == "ok"
    assert _outcome(bad) == fresh
