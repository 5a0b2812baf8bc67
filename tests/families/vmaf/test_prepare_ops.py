"""The GPU path imports each feature's kernels on a thread while CUDA starts: the ops a spec's functions name must
be registered, and preparing one imports its Triton side without launching anything."""

from __future__ import annotations

import importlib.util

import pytest

from fusedsim.core.registry import KernelOp, op, prepare_in_background
from fusedsim.metrics.registry import list_metrics

VIDEO_SPECS = list_metrics("video")


@pytest.mark.parametrize("spec", VIDEO_SPECS, ids=[s.name for s in VIDEO_SPECS])
def test_video_spec_ops_are_registered(spec):
    for kernel_op in spec.implementation().ops:
        assert isinstance(kernel_op, KernelOp)
        assert op(kernel_op.name) is kernel_op  # the registered op itself, not a copy


def test_ssim_features_list_their_kernels():
    by_name = {s.name: s for s in VIDEO_SPECS}
    assert [o.name for o in by_name["vmaf:ssim"].implementation().ops] == ["integer_ssim"]
    assert {o.name for o in by_name["vmaf:float_ms_ssim"].implementation().ops} >= {"iqa_ssim_maps", "iqa_decimate"}


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_prepare_in_background_imports_the_plan():
    kernel_op = op("sequential_sum")
    kernel_op.prepare()
    kept, load = kernel_op._plan_factory, kernel_op.load_triton
    kernel_op._plan_factory = None  # as in a fresh process (the module, imported already, registers it again)
    try:
        kernel_op.load_triton = lambda: (load(), kernel_op.triton_plan(kept))
        thread = prepare_in_background([kernel_op])
        assert thread is not None
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert kernel_op._plan_factory is kept is not None
    finally:
        kernel_op._plan_factory, kernel_op.load_triton = kept, load


def test_prepare_in_background_swallows_failures():
    class Broken:
        def prepare(self):
            raise RuntimeError("no kernel")

    thread = prepare_in_background([Broken()])
    if thread is not None:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert prepare_in_background([]) is None
