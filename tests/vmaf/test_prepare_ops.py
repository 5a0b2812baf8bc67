"""The GPU path imports each feature's kernels on a thread while CUDA starts: the ops a spec names must exist, and
preparing one imports its Triton side without launching anything."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import fusedsim.vmaf

from fusedsim.metrics.registry import list_metrics
from fusedsim.ops import op, prepare_in_background
from fusedsim.core.registry import KernelOp

VIDEO_SPECS = list_metrics("video")


VMAF_SOURCES = "".join(p.read_text() for p in (Path(fusedsim.vmaf.__file__).parent).glob("*.py"))


@pytest.mark.parametrize("spec", VIDEO_SPECS, ids=[s.name for s in VIDEO_SPECS])
def test_video_spec_ops_are_registered_and_called(spec):
    for name in spec.ops:
        assert isinstance(op(name), KernelOp)
        # a renamed op would leave a stale list: the video package must launch it by that name
        assert f'op("{name}")' in VMAF_SOURCES, f"{spec.name} lists {name!r}, which fusedsim.vmaf never calls"


def test_ssim_features_list_their_kernels():
    by_name = {s.name: s for s in VIDEO_SPECS}
    assert by_name["vmaf:ssim"].ops == ("integer_ssim",)
    assert set(by_name["vmaf:float_ms_ssim"].ops) >= {"iqa_ssim_maps", "iqa_decimate"}


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
def test_prepare_in_background_imports_the_plan():
    kernel_op = op("sequential_sum")
    kernel_op._plan_factory = None  # as in a fresh process
    thread = prepare_in_background(["sequential_sum"])
    assert thread is not None
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert kernel_op._plan_factory is not None


def test_prepare_in_background_swallows_unknown_ops():
    thread = prepare_in_background(["no_such_op"])
    if thread is not None:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert prepare_in_background([]) is None
