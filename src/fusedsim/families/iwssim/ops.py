"""Perceptual-metric ops: IW-SSIM (registered when the ``perceptual`` family loads)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import strided_example_pair
from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.iwssim.twin import (
    LUMA,
    binom_filter_ref,
    corrected_eig_levels_ref,
    corrected_eig_ref,
    enlarge2_ref,
    gaussian_table,
    grey8_ref,
    info_weight_map_op_ref,
    level_sums_ref,
    neighbourhood_gram_op_ref,
    pyr_band_ref,
    pyr_reduce_op_ref,
)


# IW-SSIM's ops are float64 only; their sums run in another order than the twin's (~1e-14 relative; the
# eigen-solvers differ by ~1e-13).
IWSSIM_TOLERANCE = {torch.float64: (1e-10, 0.0)}


def _band(shape, seed: int, device, scale: float = 20.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(shape, generator=gen, dtype=torch.float64)).to(device)


def _iwssim_gram_examples(device: torch.device) -> list[Example]:
    return [Example((_band((2, 1, 13, 11), 440, device), _band((2, 1, 13, 11), 441, device)), (True,), note="parent"),
            Example((_band((1, 1, 40, 23), 442, device), _band((1, 1, 40, 23), 443, device)), (False,),
                    note="no parent"),
            Example((_band((1, 1, 3, 3), 444, device), _band((1, 1, 3, 3), 445, device)), (True,), note="3x3")]


def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.iwssim.binom_kernel  # noqa: F401
    import fusedsim.families.iwssim.eig_kernel  # noqa: F401
    import fusedsim.families.iwssim.enlarge_kernel  # noqa: F401
    import fusedsim.families.iwssim.gram_kernel  # noqa: F401
    import fusedsim.families.iwssim.grey_kernel  # noqa: F401
    import fusedsim.families.iwssim.info_kernel  # noqa: F401
    import fusedsim.families.iwssim.level_kernel  # noqa: F401
    import fusedsim.families.iwssim.pyramid_kernel  # noqa: F401


def _import_cpu() -> None:
    """The compiled CPU kernels of these ops (numba), imported on first CPU call under ``auto``."""
    import fusedsim.families.iwssim.cpu  # noqa: F401
    import fusedsim.families.iwssim.pyramid_cpu  # noqa: F401


iwssim_gram = register_op(KernelOp(
    name="iwssim_gram",
    schema="(Tensor ref_band, Tensor parent, bool has_parent) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=neighbourhood_gram_op_ref,
    fake=lambda ref, parent, has_parent: ref.new_empty((ref.shape[0], *(2 * (10 if has_parent else 9,))),
                                                       dtype=torch.float64),
    examples=_iwssim_gram_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's neighbourhood covariance C_u = YᵀY/n (3x3 neighbourhood + parent) per image, (N, K, K).",
    load_cpu=_import_cpu,
))


def _iwssim_eig_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(450)
    a = torch.randn(2, 4, 6, generator=gen, dtype=torch.float64)
    b = torch.randn(1, 10, 3, generator=gen, dtype=torch.float64)  # rank 3 plus a ridge: 7 equal eigenvalues
    return [Example(((a @ a.mT).to(device),), note="4x4"),
            Example(((b @ b.mT + 1e-3 * torch.eye(10, dtype=torch.float64)).to(device),), note="10x10 degenerate")]


iwssim_eig = register_op(KernelOp(
    name="iwssim_eig",
    schema="(Tensor gram) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=corrected_eig_ref,
    fake=lambda gram: gram.new_empty((gram.shape[0], gram.shape[1] + 1, gram.shape[1]), dtype=torch.float64),
    examples=_iwssim_eig_examples,
    differentiable=False,
    # the inverse's error is ~cond·eps·|C⁻¹| (cond ~2e4, |C⁻¹| ~1e3 for the degenerate example: ~2e-9 absolute)
    tolerance={torch.float64: (2e-8, 0.0)},
    doc="IW-SSIM's corrected eigenvalues and inverse of a covariance (Jacobi on the GPU, no host sync).",
))


def _iwssim_eig_levels_examples(device: torch.device) -> list[Example]:
    gen = torch.Generator().manual_seed(452)
    out = []
    for levels, n, kp, sizes in ((4, 1, 10, [10, 10, 10, 9]), (2, 2, 6, [3, 6])):
        grams = torch.zeros(levels, n, kp, kp, dtype=torch.float64)
        for level, k in enumerate(sizes):
            y = torch.randn(n, k, 2 * k, generator=gen, dtype=torch.float64)
            grams[level, :, :k, :k] = y @ y.mT / (2 * k)
        out.append(Example((grams.to(device),), (sizes,), note=f"sizes {sizes} in {kp}x{kp}"))
    return out


iwssim_eig_levels = register_op(KernelOp(
    name="iwssim_eig_levels",
    schema="(Tensor grams, int[] sizes) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=corrected_eig_levels_ref,
    fake=lambda grams, sizes: grams.new_empty((*grams.shape[:2], grams.shape[-1] + 1, grams.shape[-1]),
                                              dtype=torch.float64),
    examples=_iwssim_eig_levels_examples,
    differentiable=False,
    tolerance={torch.float64: (2e-8, 0.0)},  # as iwssim_eig: the same kernel, one launch for every level
    doc="IW-SSIM's iwssim_eig of every pyramid level in one launch: grams (L, N, KP, KP) with level sizes K_l.",
))


def _iwssim_info_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, has_parent) in enumerate([((2, 1, 23, 19), True), ((1, 1, 11, 30), False)]):
        ref = _band(shape, 460 + i, device)
        dist = ref + _band(shape, 470 + i, device, 5.0)
        parent = _band(shape, 480 + i, device, 30.0)
        ref[0, 0, 6:10, 7:12] = 0.0  # flat patches exercise the tol rules
        dist[-1, 0, 5:9, 8:12] = 3.0
        k = 10 if has_parent else 9
        eig = corrected_eig_ref(neighbourhood_gram_op_ref(ref.cpu(), parent.cpu(), has_parent)).to(device)
        assert eig.shape[-1] == k
        out.append(Example((ref, dist, parent, eig), (has_parent,), note=f"{shape} parent={has_parent}"))
    return out


iwssim_info = register_op(KernelOp(
    name="iwssim_info",
    schema="(Tensor ref_band, Tensor dist_band, Tensor parent, Tensor eig, bool has_parent) -> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=info_weight_map_op_ref,
    fake=lambda ref, dist, parent, eig, has_parent: ref.new_empty((ref.shape[0], ref.shape[2] - 10,
                                                                   ref.shape[3] - 10), dtype=torch.float64),
    examples=_iwssim_info_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="IW-SSIM's information-content weights of a band pair (N, 1, H, W) on the 'valid' 11x11 region.",
    load_cpu=_import_cpu,
))


def _iwssim_binom_examples(device: torch.device) -> list[Example]:
    out = []
    cases = [((1, 1, 11, 11), -1, 2), ((1, 1, 11, 11), -2, 2), ((2, 1, 37, 70), -1, 1), ((1, 2, 70, 37), -2, 1),
             ((1, 1, 176, 181), -1, 2), ((1, 1, 3, 5), -2, 2)]
    for i, (shape, dim, step) in enumerate(cases):
        gen = torch.Generator().manual_seed(120 + i)
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 255
        out.append(Example((x.to(device),), (dim, step), note=f"{shape} dim={dim} step={step}"))
    x, _ = strided_example_pair(device, 126)
    out.append(Example((x[:, :1],), (-1, 2), note="non-contiguous"))
    return out


iwssim_binom = register_op(KernelOp(
    name="iwssim_binom",
    schema="(Tensor x, int dim, int step) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=binom_filter_ref,
    fake=lambda x, dim, step: x.new_empty((*x.shape[:2], -(-x.shape[2] // step), x.shape[3]) if dim in (-2, 2)
                                          else (*x.shape[:2], x.shape[2], -(-x.shape[3] // step))),
    examples=_iwssim_binom_examples,
    differentiable=False,
    tolerance=None,  # the twin's products and sums in its order, no FMA: bit-identical
    doc="IW-SSIM's pyramid filter: binom5 with reflect1 edges along W or H of (N, C, H, W), every step-th output.",
))

# sizes: odd and even (both reflect1 parities at the far edge), 3 (the smallest reflect1 allows), several programs
_PYRAMID_SHAPES = [(1, 1, 11, 11), (2, 1, 37, 70), (1, 2, 70, 37), (1, 1, 3, 4), (1, 1, 4, 3), (1, 1, 40, 131)]


def _iwssim_reduce_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate(_PYRAMID_SHAPES):
        x = _band(shape, 130 + i, device)
        out.append(Example((x,), note=f"{shape}"))
    x, _ = strided_example_pair(device, 137)
    out.append(Example((x[:, :1],), note="non-contiguous"))
    return out


iwssim_reduce = register_op(KernelOp(
    name="iwssim_reduce",
    schema="(Tensor x) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=pyr_reduce_op_ref,
    fake=lambda x: x.new_empty((*x.shape[:2], -(-x.shape[2] // 2), -(-x.shape[3] // 2))),
    examples=_iwssim_reduce_examples,
    differentiable=False,
    tolerance=None,  # the twin's two binom5 passes, the taps in its order, no FMA: bit-identical
    doc="IW-SSIM's pyramid reduce (buildLpyr's corrDn): binom5 along W then H, every 2nd sample, one launch.",
    load_cpu=_import_cpu,
))


def _iwssim_band_examples(device: torch.device) -> list[Example]:
    out = []
    for i, shape in enumerate(_PYRAMID_SHAPES):
        img = _band(shape, 150 + i, device)
        out.append(Example((img, pyr_reduce_op_ref(img)), note=f"{shape}"))
    img, _ = strided_example_pair(device, 157)
    lo = _band((1, 1, 10, 16), 158, device)[..., ::2]  # (1, 1, 10, 8), column stride 2
    out.append(Example((img[:, :1], lo), note="non-contiguous"))
    return out


iwssim_band = register_op(KernelOp(
    name="iwssim_band",
    schema="(Tensor img, Tensor lo) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=pyr_band_ref,
    fake=lambda img, lo: torch.empty_like(img),
    examples=_iwssim_band_examples,
    differentiable=False,
    tolerance=None,  # the twin's non-zero taps in its order, no FMA, zero sums made +0 as its zero taps do
    doc="One IW-SSIM Laplacian band: img - expand(lo) (buildLpyr's two upConv passes and the difference), one "
        "launch.",
    load_cpu=_import_cpu,
))


def _iwssim_enlarge_examples(device: torch.device) -> list[Example]:
    out = []
    # (parent shape, child size): odd and even crops (2M - 1 and 2M: the extrapolated last sample), several programs
    cases = [((1, 1, 6, 7), 11, 14), ((2, 1, 12, 11), 24, 21), ((1, 2, 5, 40), 9, 80), ((1, 1, 2, 3), 4, 5)]
    for i, (shape, h, w) in enumerate(cases):
        out.append(Example((_band(shape, 170 + i, device),), (h, w), note=f"{shape} -> ({h}, {w})"))
    x, _ = strided_example_pair(device, 175)
    out.append(Example((x[:, :1],), (2 * x.shape[-2] - 1, 2 * x.shape[-1]), note="non-contiguous"))
    return out


iwssim_enlarge = register_op(KernelOp(
    name="iwssim_enlarge",
    schema="(Tensor parent, int height, int width) -> Tensor",
    n_tensors=1,
    load_triton=_import_triton,
    reference=enlarge2_ref,
    fake=lambda parent, height, width: parent.new_empty((*parent.shape[:2], height, width)),
    examples=_iwssim_enlarge_examples,
    differentiable=False,
    tolerance=None,  # the twin's gathers, products and sums in its order (padding terms included), no FMA
    doc="IW-SSIM's parent enlargement (MATLAB imenlarge2) of (N, C, M, M') to the child size, one launch.",
))


def _iwssim_level_examples(device: torch.device) -> list[Example]:
    from fusedsim.core.moments.twin import windowed_moments_ref

    out = []
    for ex in _iwssim_info_examples(device):
        ref, dist, parent, eig = ex.tensors
        moments = windowed_moments_ref(ref, dist, gaussian_table(ref.device), True)
        out.append(Example((ref, dist, parent, eig, moments), ex.scalars, note=ex.note))
    # eig as the metric passes it: a level's block of iwssim_eig_levels' (L, N, 11, 10) output (row stride 10)
    ref, dist, parent, eig, moments = out[-1].tensors
    k = eig.shape[-1]
    packed = torch.nn.functional.pad(eig, (0, 10 - k, 0, 10 - k)).unsqueeze(0).expand(2, -1, -1, -1).contiguous()
    out.append(Example((ref, dist, parent, packed[1, :, :k + 1, :k], moments), out[-1].scalars,
                       note=f"{out[-1].note}, eig block of a padded batch"))
    return out


iwssim_level = register_op(KernelOp(
    name="iwssim_level",
    schema="(Tensor ref_band, Tensor dist_band, Tensor parent, Tensor eig, Tensor moments, bool has_parent) -> Tensor",
    n_tensors=5,
    load_triton=_import_triton,
    reference=level_sums_ref,
    fake=lambda ref, dist, parent, eig, moments, has_parent: ref.new_empty((ref.shape[0], 2), dtype=torch.float64),
    examples=_iwssim_level_examples,
    differentiable=False,
    tolerance=IWSSIM_TOLERANCE,
    doc="One IW-SSIM band level: [Σ cs·iw, Σ iw] (N, 2) from the bands, the eigen-correction and the moments.",
    load_cpu=_import_cpu,
))


def _iwssim_grey8_examples(device: torch.device) -> list[Example]:
    out = []
    for i, (shape, luma) in enumerate([((1, 3, 1, 1), "matlab"), ((2, 3, 13, 17), "matlab"),
                                       ((1, 3, 9, 70), "bt601")]):
        gen = torch.Generator().manual_seed(490 + i)
        raw = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
        coefs, rounded = LUMA[luma]
        out.append(Example((raw.to(device), torch.tensor(coefs, dtype=torch.float64, device=device)), (rounded,),
                           note=f"{shape} {luma}"))
    big = torch.randint(0, 256, (1, 3, 22, 31), generator=torch.Generator().manual_seed(499), dtype=torch.uint8)
    coefs, _ = LUMA["matlab"]
    out.append(Example((big.to(device).to(memory_format=torch.channels_last)[:, :, 3:20, 1::2],
                        torch.tensor(coefs, dtype=torch.float64, device=device)), (True,), note="non-contiguous"))
    return out


iwssim_grey8 = register_op(KernelOp(
    name="iwssim_grey8",
    schema="(Tensor raw, Tensor luma, bool rounded) -> Tensor",
    n_tensors=2,
    load_triton=_import_triton,
    reference=grey8_ref,
    fake=lambda raw, luma, rounded: raw.new_empty((raw.shape[0], 1, *raw.shape[2:]), dtype=torch.float64),
    examples=_iwssim_grey8_examples,
    differentiable=False,
    tolerance=None,  # the twin's float64 operations in its order, no FMA: bit-identical
    doc="IW-SSIM's grey (N, 1, H, W) float64 from uint8 sRGB (N, 3, H, W) with the given luma coefficients.",
    load_cpu=_import_cpu,
))
