"""Golden snapshots of rendered kernel source.

A renderer change shows up here as a reviewable diff of the generated Triton code, not only as a value or speed
change on a GPU. After an intended change, rewrite the snapshots and review the diff:

    FUSEDSIM_UPDATE_SNAPSHOTS=1 python -m pytest tests/core/test_kernel_snapshots.py
"""

from __future__ import annotations

import difflib
import os
import pathlib

import pytest

from fusedsim.core.codegen import jit_from_source

SNAPSHOTS = pathlib.Path(__file__).parent / "snapshots"
UPDATE = "FUSEDSIM_UPDATE_SNAPSHOTS"


def _ssim_forward(taps: int) -> str:
    from fusedsim.families.ssim.kernel_source import render_forward

    # the name kernels._kernel gives the 2-D single-scale forward (inference, and saving the gradient maps)
    return render_forward(taps, False, f"_ssim_fwd_2d_k{taps}_kernel")


def _moments(taps: int) -> str:
    from fusedsim.core.moments.source import render_moments

    return render_moments(taps, False, f"_windowed_moments_2d_k{taps}_kernel")


def _lncc_forward(taps: int) -> str:
    # 2-D: the streamed renderer serves 2-D and 3-D alike (3-D defaults to the slab kernels)
    from fusedsim.families.registration.lncc_kernel import render_forward

    return render_forward(taps, False, f"_lncc_fwd_2d_k{taps}_kernel")


CASES = {
    f"{stem}_k{taps}": (render, taps)
    for stem, render in (("ssim_fwd_2d", _ssim_forward), ("windowed_moments_2d", _moments),
                         ("lncc_fwd_2d", _lncc_forward))
    for taps in (7, 11)
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_source_matches_snapshot(case):
    render, taps = CASES[case]
    source = render(taps)
    path = SNAPSHOTS / f"{case}.py.txt"
    if os.environ.get(UPDATE):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        return
    assert path.exists(), f"missing snapshot {path}; create it with {UPDATE}=1 python -m pytest {__file__}"
    expected = path.read_text(encoding="utf-8")
    if source != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), source.splitlines(keepends=True),
                                            fromfile=f"snapshot/{path.name}", tofile=f"rendered/{case}"))
        pytest.fail(f"rendered source of {case} differs from its snapshot:\n{diff}\n"
                    f"If intended, regenerate: {UPDATE}=1 python -m pytest tests/core/test_kernel_snapshots.py",
                    pytrace=False)


def test_dump_kernels_writes_source(monkeypatch, tmp_path):
    source = "def tiny(x_ptr):\n    tl.store(x_ptr, 1.0)\n"
    target = tmp_path / "dumped"  # missing: jit_from_source creates it
    monkeypatch.setenv("FUSEDSIM_DUMP_KERNELS", str(target))
    jit_from_source("tiny", source)
    assert (target / "tiny.py").read_text(encoding="utf-8") == source
    assert [p.name for p in target.iterdir()] == ["tiny.py"]  # no temporary file left behind


def test_dump_kernels_off_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("FUSEDSIM_DUMP_KERNELS", raising=False)
    monkeypatch.chdir(tmp_path)
    jit_from_source("tiny_off", "def tiny_off(x_ptr):\n    tl.store(x_ptr, 1.0)\n")
    assert not any(tmp_path.iterdir())
