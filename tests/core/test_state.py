"""fusedsim.core.state: one reset() empties every registered holder, and public functions rebuild what they need."""

from __future__ import annotations

import functools

import torch

import fusedsim
from fusedsim.core import state
from fusedsim.core.calls import CallTable


def test_cached_is_a_plain_lru_cache_that_reset_empties():
    before = state.registered()
    calls = []

    @state.cached(maxsize=4)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    @state.cached
    def unbounded_default(x: int) -> int:
        return x

    assert state.registered() == before + 2
    assert isinstance(square, functools._lru_cache_wrapper) and square.cache_info().maxsize == 4
    assert unbounded_default.cache_info().maxsize == 128
    assert square(3) == 9 and square(3) == 9 and calls == [3]
    assert square.cache_info().currsize == 1
    state.reset()
    assert square.cache_info().currsize == 0
    assert square(3) == 9 and calls == [3, 3]


def test_reset_empties_call_tables_and_dict_holders():
    table = CallTable()
    holder = state.cache_dict()
    kept = object()
    holder["key"] = kept
    call = table.get(("key",), lambda: (lambda: 1))
    assert len(table) == 1 and table.get(("key",), lambda: (lambda: 2)) is call
    assert type(holder) is dict and holder["key"] is kept

    class Box:
        def __init__(self) -> None:
            self.items = [1, 2]

        def clear(self) -> None:
            self.items = []

    box = state.register(Box())
    state.reset()
    assert len(table) == 0 and holder == {} and box.items == []
    assert table.get(("key",), lambda: (lambda: 2)) is not call  # rebuilt


def test_public_functions_give_the_same_values_after_reset():
    from fusedsim.families.ssim import functional

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 24, 24, generator=gen, dtype=torch.float64) * 255
    y = (x + 20 * torch.rand(x.shape, generator=gen, dtype=torch.float64)).clamp(0, 255)
    ref = torch.randint(0, 256, (3, 16, 16), generator=gen, dtype=torch.uint8)
    dist = (ref.to(torch.int16) + torch.randint(-12, 13, ref.shape, generator=gen)).clamp(0, 255).to(torch.uint8)

    ssim_before = fusedsim.ssim(x, y)
    dssim_before = fusedsim.dssim(ref, dist)
    assert len(functional.CALLS) > 0
    state.reset()
    assert len(functional.CALLS) == 0
    assert torch.equal(fusedsim.ssim(x, y), ssim_before)
    assert torch.equal(fusedsim.dssim(ref, dist), dssim_before)
    assert len(functional.CALLS) > 0
