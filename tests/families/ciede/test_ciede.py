"""ciede (libvmaf feature ``ciede``, ``ciede2000``) against libvmaf 3.2.0's own per-frame values.

Expected values: ``refdata/vmaf-score/reference/<pair>.json``, run ``extra`` (``-n --feature ... --feature ciede
...``, that folder's README, sections 4.6 and 5), column ``ciede2000`` (``null`` -> ``inf``: identical frames).
**Even sizes only:** on the odd-size (333x217) pairs libvmaf reads past its floor-size chroma planes and its value
varies between runs (README, section 7, item 4), so those pairs are not compared. The numba kernel (the C
library's transcendental functions, as libvmaf) must equal libvmaf on every frame, and so must the twin (the C
library's ``powf``, torch's other functions) on the frames it is run on (one per pair: its cost). The Triton kernel
is checked on crops against the twin's per-pixel dE00 (on the GPU when there is one, else the interpreter, where
numpy stands in for libdevice), and on every frame on a GPU, where CUDA's ``powf`` (not glibc's) may move a score
in its last bits: held to 1e-9 there (the rounded double ``pow`` in place of glibc's ``powf`` moved these fixtures'
scores by at most 3.3e-10).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.ciede.api import ciede
from fusedsim.families.ciede.twin import ciede2000_ref, lab_ref, libvmaf_chroma_full
from fusedsim.families.vmaf.feature_requests import FeatureRequest
from score_planes import load_plane_pairs

EVEN_PAIRS = ["f480x270_10b_mixed", "k256x144_12b_mixed", "prev_a576x324_8b_blur", "prev_a576x324_8b_jpeg",
              "prev_a576x324_8b_noise", "prev_a576x324_8b_shift", "prev_d504x400_10b_blurnoise",
              "prev_d504x400_10b_jpeg8", "r576x324_8b_mixed"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GPU_TOLERANCE = 1e-9  # abs, on scores of 25-55: CUDA's powf and transcendental functions vs the C library's


@pytest.fixture(scope="module")
def pairs(refdata):
    loaded = {p.pair.name: p for p in load_plane_pairs(refdata) if p.pair.width % 2 == 0}
    assert sorted(loaded) == EVEN_PAIRS
    return loaded


def _expected(pp, frames=None) -> list[float]:
    values = [math.inf if v is None else v for v in pp.pair.metric("extra", "ciede2000")]
    return values if frames is None else [values[i] for i in frames]


def _frames(side, frames=None, device="cpu"):
    return [torch.from_numpy(p if frames is None else p[frames]).to(device) for p in side]


def test_numba_matches_libvmaf_on_every_frame(pairs):
    for name, pp in pairs.items():
        with use_backend("auto"):
            got = ciede(_frames(pp.ref), _frames(pp.dist), pp.pair.bit_depth)["ciede2000"]
        assert got.tolist() == _expected(pp), name


def test_twin_matches_libvmaf(pairs):
    for name, pp in pairs.items():
        frames = [pp.pair.n // 2]
        with use_backend("reference"):
            got = ciede(_frames(pp.ref, frames), _frames(pp.dist, frames), pp.pair.bit_depth)["ciede2000"].tolist()
        assert got == _expected(pp, frames), name


@pytest.mark.parametrize("name, frame, box", [
    ("r576x324_8b_mixed", 9, (100, 36, 24, 40)),  # jpeg 35, (top, left, h, w) of luma
    ("f480x270_10b_mixed", 22, (60, 200, 16, 30)),  # downup + jpeg, 10 bit
    ("k256x144_12b_mixed", 1, (10, 20, 12, 22)),
])
def test_triton_matches_twin_on_crops(pairs, name, frame, box):
    from fusedsim.families.ciede import kernel

    pp = pairs[name]
    top, left, h, w = box
    bd = pp.pair.bit_depth
    sides = []
    for side in (pp.ref, pp.dist):
        y = torch.from_numpy(side[0][frame:frame + 1, top:top + h, left:left + w].copy())
        chroma = [torch.from_numpy(c[frame:frame + 1, top // 2:(top + h) // 2, left // 2:(left + w) // 2].copy())
                  for c in side[1:]]
        sides.append([y] + [libvmaf_chroma_full(c, h, w) for c in chroma])
    want = ciede2000_ref(lab_ref(*sides[0], bd), lab_ref(*sides[1], bd)).reshape(1, -1).double()
    got = kernel.ciede_de_fwd(*(p.to(DEVICE) for p in sides[0] + sides[1]), bd).cpu()
    assert (got == want).float().mean().item() >= 0.999
    assert torch.allclose(got, want, rtol=1e-6, atol=0)  # a float32 rounding turning on a last double bit
    sums = kernel.ciede_de_sum_fwd(*(p.to(DEVICE) for p in sides[0] + sides[1]), bd).cpu()
    assert sums.tolist() == pytest.approx([want.sum().item()], rel=1e-9)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_matches_libvmaf_on_every_frame(pairs):
    exact = total = 0
    for name, pp in pairs.items():
        got = ciede(_frames(pp.ref, device="cuda"), _frames(pp.dist, device="cuda"), pp.pair.bit_depth)
        got, want = got["ciede2000"].tolist(), _expected(pp)
        assert got == pytest.approx(want, abs=GPU_TOLERANCE, rel=0), name
        exact += sum(g == w for g, w in zip(got, want))
        total += len(want)
    print(f"ciede on the GPU: {exact} of {total} frames bit-identical to libvmaf")


def test_chroma_layouts_read_as_libvmaf():
    c = torch.arange(1, 1 + 2 * 3 * 4).reshape(2, 3, 4)
    # 4:2:0: c[i // 2][j // 2]
    full = libvmaf_chroma_full(c, 5, 7)
    assert full.shape == (2, 5, 7) and full[1, 4, 6].item() == c[1, 2, 3].item() and full[0, 3, 2] == c[0, 1, 1]
    # 4:4:4 unchanged
    assert libvmaf_chroma_full(c, 3, 4) is c
    # 4:2:2 (w = 8): libvmaf's row walk of 4:2:0 over rows of align32(4) = 32 samples, zero padding read
    full = libvmaf_chroma_full(c, 3, 8)
    assert full[0, 0].tolist() == c[0, 0].tolist() + [0] * 4
    assert full[0, 2].tolist() == c[0, 1].tolist() + [0] * 4  # row 2 reads chroma row 1


def test_identical_frames_give_inf_as_libvmaf():
    y = torch.randint(0, 1024, (2, 6, 8), dtype=torch.int16)
    c = torch.randint(0, 1024, (2, 3, 4), dtype=torch.int16)
    assert all(math.isinf(v) for v in ciede([y, c, c], [y, c, c], 10)["ciede2000"].tolist())


def test_bad_inputs_name_the_argument():
    y = np.zeros((6, 8), np.uint8)
    c = np.zeros((3, 4), np.uint8)
    with pytest.raises(ValueError, match="bit_depth=9 is not supported by ciede"):
        ciede([y, c, c], [y, c, c], 9)
    with pytest.raises(ValueError, match="three planes"):
        ciede([y, c], [y, c], 8)
    odd, floor_c = np.zeros((5, 7), np.uint8), np.zeros((2, 3), np.uint8)
    with pytest.raises(ValueError, match="ceil-size 4:2:0 chroma"):
        ciede([odd, floor_c, floor_c], [odd, floor_c, floor_c], 8)
    with pytest.raises(ValueError, match=r"ref\[cr\] is"):
        ciede([y, c, c[:2]], [y, c, c[:2]], 8)
    with pytest.raises(ValueError, match="feature 'ciede' has no option 'x'"):
        FeatureRequest.of("ciede", {"x": "1"})
