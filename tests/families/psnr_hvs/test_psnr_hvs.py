"""psnr_hvs (libvmaf feature ``psnr_hvs``) against libvmaf 3.2.0's own per-frame values, with ``==`` on the doubles.

Expected values: ``refdata/vmaf-score/reference/<pair>.json``, run ``extra`` (``-n --feature ... --feature
psnr_hvs ...``, see that folder's README, sections 4.6 and 5), columns ``psnr_hvs_y``, ``psnr_hvs_cb``,
``psnr_hvs_cr`` and ``psnr_hvs`` of all 12 pairs (``null`` -> ``inf``: identical frames). The odd-size pairs' runs
read floor-size chroma, which is what libvmaf's picture holds and what the API reads of the ceil-size planes. The
numba kernel is checked on every frame, the twin on one frame per pair and every frame of the 12-bit pair (its
cost), the Triton kernel on crops against the twin (on the GPU when there is one, else the interpreter) and on
every frame on a GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.families.psnr_hvs.api import OUTPUTS, psnr_hvs
from fusedsim.families.psnr_hvs.ops import example_planes
from fusedsim.families.psnr_hvs.twin import _sequential_sum_f32, psnr_hvs_plane_ref, psnr_hvs_terms_ref
from fusedsim.families.vmaf.feature_requests import FeatureRequest
from score_planes import load_plane_pairs

N_PAIRS = 12
#: PTX instructions of the block kernel for sm_90 (loops over small bodies): about 1,250; twice that is room for
#: changes, far below the ~6,100 of the earlier straight-line kernel (94 s to compile).
INSTRUCTION_BOUND = 2500
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def pairs(refdata):
    loaded = load_plane_pairs(refdata)
    assert len(loaded) == N_PAIRS
    return loaded


def _expected(pair, frames=None) -> dict[str, list[float]]:
    out = {}
    for name in OUTPUTS:
        values = [math.inf if v is None else v for v in pair.pair.metric("extra", name)]
        out[name] = values if frames is None else [values[i] for i in frames]
    return out


def _frames(side, frames=None, device="cpu"):
    return [torch.from_numpy(p if frames is None else p[frames]).to(device) for p in side]


def _got(out: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    return {name: out[name].tolist() for name in OUTPUTS}


def test_numba_matches_libvmaf_on_every_frame(pairs):
    for pp in pairs:
        with use_backend("auto"):
            got = psnr_hvs(_frames(pp.ref), _frames(pp.dist), pp.pair.bit_depth)
        assert _got(got) == _expected(pp), pp.pair.name


def test_twin_matches_libvmaf(pairs):
    for pp in pairs:
        frames = list(range(pp.pair.n)) if pp.pair.bit_depth == 12 else [pp.pair.n // 2]
        with use_backend("reference"):
            got = psnr_hvs(_frames(pp.ref, frames), _frames(pp.dist, frames), pp.pair.bit_depth)
        assert _got(got) == _expected(pp, frames), pp.pair.name


@pytest.mark.parametrize("name, frame, box", [
    ("r576x324_8b_mixed", 9, (100, 37, 180, 60)),  # jpeg 35: (top, left, h, w) of luma
    ("f480x270_10b_mixed", 15, (60, 200, 23, 36)),  # noise 16, 10 bit, odd crop height
    ("k256x144_12b_mixed", 2, (0, 0, 30, 51)),
])
def test_triton_matches_twin_on_crops(pairs, name, frame, box):
    pp = next(p for p in pairs if p.pair.name == name)
    top, left, h, w = box
    for plane in range(3):
        scale = 2 if plane else 1
        crop = (slice(frame, frame + 1), slice(top // scale, (top + h) // scale),
                slice(left // scale, (left + w) // scale))
        r = torch.from_numpy(pp.ref[plane][crop].copy()).to(DEVICE)
        d = torch.from_numpy(pp.dist[plane][crop].copy()).to(DEVICE)
        if min(r.shape[1:]) < 8:
            continue
        from fusedsim.families.psnr_hvs import kernel

        assert torch.equal(kernel.psnr_hvs_plane_fwd(r, d, pp.pair.bit_depth, plane).cpu(),
                           psnr_hvs_plane_ref(r.cpu(), d.cpu(), pp.pair.bit_depth, plane)), (name, plane)


def _non_contiguous(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(N, h, w)`` as a view with strides that are neither contiguous nor unit (columns every 2nd of a
    transposed buffer)."""
    n, h, w = x.shape
    buf = torch.zeros(n, 2 * w + 1, h + 3, dtype=x.dtype)
    buf[:, 1::2, 2:h + 2] = x.transpose(1, 2)
    return buf[:, 1::2, 2:h + 2].transpose(1, 2)


@pytest.mark.parametrize("shape, bits, plane, dtypes, layout, block", [
    ((2, 15, 22), 8, 0, (torch.uint8, torch.uint8), "contiguous", 4),  # odd size, two frames, several programs
    ((1, 8, 8), 9, 1, (torch.int16, torch.int16), "contiguous", None),  # one block
    ((1, 30, 17), 10, 2, (torch.uint16, torch.uint16), "contiguous", 4),  # uint16 read through int16
    ((2, 23, 37), 10, 0, (torch.uint16, torch.uint16), "ref strided", 8),  # ref and dist with different strides
    ((1, 16, 29), 11, 1, (torch.int32, torch.int32), "both strided", None),
    ((1, 37, 44), 12, 2, (torch.uint16, torch.int32), "contiguous", 8),  # mixed dtypes: both read as int32
    ((3, 9, 50), 12, 0, (torch.int16, torch.int16), "contiguous", 16),  # one block row, partial last program
])
def test_triton_terms_match_twin(shape, bits, plane, dtypes, layout, block):
    """Every error term of the Triton block kernel (on the GPU when there is one, else the interpreter) equals
    the twin's, bit for bit, and so does the plane's error."""
    from fusedsim.families.psnr_hvs import kernel

    ref, dist = example_planes(shape, bits, seed=sum(shape) + bits)
    ref, dist = ref.to(dtypes[0]), dist.to(dtypes[1])
    want = psnr_hvs_terms_ref(ref, dist, plane)
    if layout != "contiguous":
        ref = _non_contiguous(ref)
        dist = _non_contiguous(dist) if layout == "both strided" else dist
        assert not ref.is_contiguous()
    r, d = ref.to(DEVICE), dist.to(DEVICE)
    assert torch.equal(kernel.psnr_hvs_terms(r, d, plane, block=block).cpu(), want)
    assert torch.equal(kernel.psnr_hvs_plane_fwd(r, d, bits, plane).cpu(), psnr_hvs_plane_ref(ref, dist, bits, plane))


def test_triton_terms_at_full_scale_contrast():
    """12-bit 0/4095 checkerboards against their inverse and random extremes: the largest DCT coefficients (the
    int32 lifting steps and ``C^2`` must not overflow) and the largest masking energies."""
    from fusedsim.families.psnr_hvs import kernel

    gen = torch.Generator().manual_seed(3)
    yy, xx = torch.meshgrid(torch.arange(29), torch.arange(36), indexing="ij")
    board = ((yy + xx) % 2 * 4095).to(torch.int16)
    noise = (torch.randint(0, 2, (29, 36), generator=gen) * 4095).to(torch.int16)
    ref = torch.stack([board, noise, board])
    dist = torch.stack([4095 - board, 4095 - noise, noise])
    got = kernel.psnr_hvs_terms(ref.to(DEVICE), dist.to(DEVICE), 0).cpu()
    assert torch.equal(got, psnr_hvs_terms_ref(ref, dist, 0))


@pytest.mark.parametrize("dtype, mask16", [("*u8", False), ("*i16", True)])
def test_block_kernel_compiles_small_for_sm90(dtype, mask16):
    """Compiled for an H100 (no GPU needed; about 2 s here): the block kernel is loops over small bodies. The
    earlier straight-line kernel (every sample and coefficient a variable) took ~94 s and 682 kB of PTX; a bound
    on its instruction count catches a regression to such code. No FMA contraction (libvmaf rounds each product)
    and IEEE float32 division (Triton's ``/`` would be ``div.full.f32``)."""
    from _offline_compile import compiled_asm

    signature = {"ref_ptr": dtype, "dist_ptr": dtype, "csf_ptr": "*fp32", "mask_ptr": "*fp32", "out_ptr": "*fp32",
                 "scratch_ptr": "*i32", **{name: "i32" for name in ("rs0", "rs1", "rs2", "ds0", "ds1", "ds2", "NB",
                                                                    "BX", "L")},
                 "var64": "fp32", "var16": "fp32"}
    ptx = compiled_asm("fusedsim.families.psnr_hvs.kernel:_psnr_hvs_blocks", signature,
                       {"MASK16": mask16, "BLK": 128}, "ptx", num_warps=4, enable_fp_fusion=False)
    instructions = [line for line in ptx.splitlines()
                    if line.rstrip().endswith(";") and not line.lstrip().startswith((".", "//"))]
    assert len(instructions) < INSTRUCTION_BOUND, len(instructions)
    assert "fma.rn.f32" not in ptx and "div.full.f32" not in ptx
    assert "div.rn.f32" in ptx and "sqrt.rn.f64" in ptx


def test_sequential_sum32_is_a_float32_running_sum():
    from fusedsim.families.psnr_hvs.sequential_sum32_kernel import sequential_sum32

    gen = torch.Generator().manual_seed(7)
    x = (torch.rand(4, 6000, generator=gen) * 2 - 0.4) * torch.exp2(torch.randint(-30, 30, (4, 6000), generator=gen)
                                                                  .float())
    x[0, :300] = 0.0  # a zero start
    x[1, ::3] = 2.0 ** -4  # ties against a growing sum
    x[2] = -x[2].abs()  # a negative sum crossing binades
    x[3, 17] = float("inf")
    x = x.to(torch.float32).to(DEVICE)
    got = sequential_sum32(x, block=512).cpu()
    want = _sequential_sum_f32(x.cpu())
    assert torch.equal(got[:3], want[:3]) and math.isinf(got[3].item()) and math.isinf(want[3].item())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_matches_libvmaf_on_every_frame(pairs):
    for pp in pairs:
        got = psnr_hvs(_frames(pp.ref, device="cuda"), _frames(pp.dist, device="cuda"), pp.pair.bit_depth)
        assert _got(got) == _expected(pp), pp.pair.name


def test_identical_planes_give_inf_as_libvmaf():
    y = torch.randint(0, 256, (1, 16, 16), dtype=torch.uint8)
    c = torch.randint(0, 256, (1, 8, 8), dtype=torch.uint8)
    out = psnr_hvs([y, c, c], [y, c, c], 8)
    assert all(math.isinf(out[name].item()) for name in OUTPUTS)


def test_bad_inputs_name_the_argument():
    y = np.zeros((16, 16), np.uint8)
    c = np.zeros((8, 8), np.uint8)
    with pytest.raises(ValueError, match="bit_depth=16 is not supported by psnr_hvs"):
        psnr_hvs([y.astype(np.uint16)] + [c.astype(np.uint16)] * 2, [y.astype(np.uint16)] + [c.astype(np.uint16)] * 2,
                 16)
    with pytest.raises(ValueError, match="three planes"):
        psnr_hvs(y, y, 8)
    small = np.zeros((14, 14), np.uint8)
    with pytest.raises(ValueError, match=r"ref\[cb\] is 7x7 .*at least 8x8"):
        psnr_hvs([small, c[:7, :7], c[:7, :7]], [small, c[:7, :7], c[:7, :7]], 8)
    with pytest.raises(ValueError, match=r"ref\[cb\] planes are 5x8"):
        psnr_hvs([y, c[:5], c[:5]], [y, c[:5], c[:5]], 8)
    with pytest.raises(ValueError, match="outside"):
        psnr_hvs([y, c, c + 0], [y, c, (c + 0).astype(np.int32) + 300], 8)
    with pytest.raises(ValueError, match="feature 'psnr_hvs' has no option 'debug'"):
        FeatureRequest.of("psnr_hvs", {"debug": "true"})
