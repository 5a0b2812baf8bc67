"""Registration ops: warp, compose, lncc, parzen_histogram (mutual information)."""

from __future__ import annotations

import torch

from fusedsim.core.examples import (
    example_pair,
    strided_example_pair,
)
from fusedsim.core.registry import Example, KernelOp, register_op
from fusedsim.families.registration.lncc_twin import lncc_ref
from fusedsim.families.registration.mutual_information_twin import parzen_histogram_ref
from fusedsim.core.moments.twin import compute_dtype
from fusedsim.families.registration.warp_twin import compose_ref, warp_ref


# ------------------------------------------------------------------------------------------------- warps
def _warp_batch(*tensors) -> int:
    return max(t.shape[0] for t in tensors if t.numel())


def _warp_fake(image, affine, grid, out_shape, is_displacement, mode, padding, align_corners):
    lattice = tuple(grid.shape[1:-1]) if grid.numel() else tuple(out_shape)
    return image.new_empty((_warp_batch(image, affine, grid), image.shape[1], *lattice))


def _warp_examples(device: torch.device) -> list[Example]:
    """Random images, near-identity affines and displacements of a few voxels (points rarely on a voxel edge,
    where the coordinate gradient jumps); lattices differ from the image's; batch-1 broadcasting of each input."""
    cases = [  # image shape, lattice, (batch of affine, grid; 0: absent), is_displacement, mode, padding, ac
        ((1, 1, 7, 9), (6, 8), (1, 1), True, 0, 0, True),
        ((2, 2, 9, 11), (7, 10), (2, 2), True, 0, 1, False),
        ((1, 2, 8, 9), (9, 7), (2, 0), True, 0, 2, True),
        ((2, 1, 8, 9), (5, 6), (0, 1), True, 0, 2, False),
        ((2, 2, 8, 9), (6, 7), (0, 2), False, 0, 1, True),
        ((1, 2, 8, 9), (6, 7), (1, 3), True, 1, 0, True),
        ((1, 2, 5, 6, 7), (4, 5, 6), (1, 1), True, 0, 0, True),
        ((2, 1, 5, 6, 7), (6, 4, 5), (1, 2), True, 0, 2, False),
        ((1, 1, 6, 5, 7), (4, 4, 5), (0, 2), True, 0, 1, True),
        ((2, 1, 5, 6, 7), (4, 5, 6), (2, 2), True, 1, 2, False),
    ]
    out = []
    for i, (shape, lattice, (ba, bg), is_disp, mode, pad, ac) in enumerate(cases):
        gen = torch.Generator().manual_seed(300 + i)
        nd = len(lattice)
        image = torch.rand(shape, generator=gen, dtype=torch.float64)
        affine = (torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(ba, nd, nd + 1, generator=gen,
                                                                                   dtype=torch.float64)
                  if ba else torch.empty(0, dtype=torch.float64))
        grid = (0.15 * torch.randn(bg, *lattice, nd, generator=gen, dtype=torch.float64)
                if bg else torch.empty(0, dtype=torch.float64))
        if not is_disp:
            grid = torch.rand(bg, *lattice, nd, generator=gen, dtype=torch.float64) * 2.4 - 1.2
        grads = tuple(j for j, t in enumerate((image, affine, grid)) if t.numel())
        out.append(Example((image.to(device), affine.to(device), grid.to(device)), (list(lattice), is_disp, mode,
                                                                                    pad, ac),
                           grads=grads, note=f"{shape}->{lattice} A/u batch {ba}/{bg} disp={is_disp} mode={mode} "
                                             f"pad={pad} ac={ac}"))
    gen = torch.Generator().manual_seed(399)
    image = torch.rand(1, 7, 12, 10, generator=gen, dtype=torch.float64)[:, ::3].transpose(-1, -2)
    grid = 0.1 * torch.randn(1, 3, 5, 4, generator=gen, dtype=torch.float64)[..., 1:3].transpose(1, 2)
    affine = (torch.eye(2, 4, dtype=torch.float64) + 0.05 * torch.randn(1, 2, 4, generator=gen,
                                                                        dtype=torch.float64))[..., 1:]
    out.append(Example((image.to(device), affine.to(device), grid.to(device)), ([5, 3], True, 0, 0, True),
                       grads=(0, 1, 2), note="non-contiguous image, affine and grid"))
    return out


# Tolerances against the float64 twin. float64: the same formulas in another order (~1e-15). float32: points
# rounded to ~1e-7 times half the image size, so ~1e-6 on values and ~1e-5 on gradients.
WARP_TOLERANCE = {torch.float64: (1e-10, 1e-10), torch.float32: (2e-5, 2e-4)}

def _import_triton() -> None:
    """The Triton side of these ops, imported on first GPU use (Triton itself with it): each module registers
    its plans on the ops below."""
    import fusedsim.families.registration.lncc_kernel  # noqa: F401
    import fusedsim.families.registration.mutual_information_kernel  # noqa: F401
    import fusedsim.families.registration.warp_kernel  # noqa: F401


warp = register_op(KernelOp(
    name="warp",
    schema="(Tensor image, Tensor affine, Tensor grid, int[] out_shape, bool is_displacement, int mode, "
           "int padding, bool align_corners) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
    reference=warp_ref,
    fake=_warp_fake,
    examples=_warp_examples,
    tolerance=WARP_TOLERANCE,
    doc="grid_sample(image, affine_grid(A) + u) (or at a full field φ) for (B, C, H, W) / (B, C, D, H, W) images "
        "without materialising the sampling grid; bilinear/nearest, zeros/border/reflection; empty affine/grid "
        "= absent; gradients for the image, the affine and the displacement.",
))


def _compose_fake(u, v, affine, add_v, align_corners):
    return u.new_empty((_warp_batch(u, v, affine), *v.shape[1:-1], v.shape[-1]))


def _compose_examples(device: torch.device) -> list[Example]:
    cases = [((1, 9, 11), (1, 7, 8), 1, True, True), ((2, 8, 9), (1, 6, 7), 0, False, False),
             ((1, 5, 6, 7), (2, 4, 5, 6), 2, True, False), ((2, 5, 4, 6), (2, 4, 5, 3), 0, True, True)]
    out = []
    for i, (u_shape, v_shape, ba, add_v, ac) in enumerate(cases):
        gen = torch.Generator().manual_seed(350 + i)
        nd = len(u_shape) - 1
        u = 0.2 * torch.randn(*u_shape, nd, generator=gen, dtype=torch.float64)
        v = 0.15 * torch.randn(*v_shape, nd, generator=gen, dtype=torch.float64)
        affine = (torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(ba, nd, nd + 1, generator=gen,
                                                                                   dtype=torch.float64)
                  if ba else torch.empty(0, dtype=torch.float64))
        grads = (0, 1, 2) if ba else (0, 1)
        out.append(Example((u.to(device), v.to(device), affine.to(device)), (add_v, ac), grads=grads,
                           note=f"u {u_shape} v {v_shape} affine batch {ba} add_v={add_v} ac={ac}"))
    return out


compose = register_op(KernelOp(
    name="compose",
    schema="(Tensor u, Tensor v, Tensor affine, bool add_v, bool align_corners) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
    reference=compose_ref,
    fake=_compose_fake,
    examples=_compose_examples,
    tolerance=WARP_TOLERANCE,
    doc="Warp composition v + u∘(A·x + v) (or u∘(A·x + v)) of channel-last displacement fields, bilinear with "
        "zero padding, in one pass; gradients for u, v and A.",
))



# ------------------------------------------------------------------------------------------- registration
def _lncc_fake(pred, target, win, scale, q, nr, floor, dr_add, clamp, reduce):
    return pred.new_empty(tuple(pred.shape) if reduce == -1 else (), dtype=compute_dtype(pred.dtype))


def _lncc_examples(device: torch.device) -> list[Example]:
    from fusedsim.families.registration.lncc_twin import lncc_constants, lncc_taps, lncc_window_table

    cases = [  # shape, K, kernel type, convention, reduce (1 mean, 2 sum, -1 map), grads
        ((1, 1, 5, 6), 3, "box", "fireants", 1, (0, 1)),  # the smallest: the twin's gradcheck runs on it
        ((1, 2, 7, 8), 5, "gaussian", "monai", 2, (0,)),
        ((1, 1, 8, 7), 5, "gaussian", "fireants_torch", -1, (0, 1)),  # asymmetric window
        ((1, 1, 4, 5, 6), 3, "gaussian", "monai", 1, (0, 1)),
        ((1, 2, 3, 4, 5), 3, "box", "fireants", -1, (1,)),
    ]
    out = []
    for i, (shape, k, kind, conv, reduce, grads) in enumerate(cases):
        x, y = example_pair(shape, device, 70 + i)
        taps = lncc_taps(k, kind, k / 3.0 if conv != "fireants" else 1.5, conv)
        scale, q, nr, floor, dr_add, clamp = lncc_constants(conv, taps, len(shape) - 2, 1e-5, 1e-5)
        out.append(Example((x, y, lncc_window_table(taps, shape[1], torch.float64, device)),
                           (scale, q, nr, floor, dr_add, clamp, reduce), grads=grads,
                           note=f"{shape} K={k} {kind} {conv} reduce={reduce}"))
    x, y = strided_example_pair(device, 77)
    taps = lncc_taps(3, "box", 1.0, "monai")
    out.append(Example((x, y, lncc_window_table(taps, 2, torch.float64, device)),
                       (*lncc_constants("monai", taps, 2, 0.0, 1e-5), 1), grads=(0, 1), note="non-contiguous"))
    return out


lncc = register_op(KernelOp(
    name="lncc",
    schema="(Tensor pred, Tensor target, Tensor win, float scale, float q, float nr, float floor, float dr_add, "
           "bool clamp, int reduce) -> Tensor",
    n_tensors=3,
    load_triton=_import_triton,
    reference=lncc_ref,
    fake=_lncc_fake,
    examples=_lncc_examples,
    # float32: moments to ~1e-7 relative, ncc through the variance cancellation E[x²] - mu² to ~1e-6, gradients
    # (a second cancellation in the adjoint sums) to ~1e-5 on these well-conditioned random pairs
    tolerance={torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4)},
    doc="Local normalised cross-correlation loss (MONAI and FireANTs conventions) of (N, C, H, W) / (N, C, D, H, W) "
        "pairs: -mean, -sum or the -ncc map; exact gradients for both inputs.",
))


def _hist_fake(pred, target, norm, centres, preterm, clamp, pooled):
    n, c = pred.shape[:2]
    nb = centres.shape[0]
    return pred.new_empty((n, 1 if pooled else c, nb + 2, nb), dtype=compute_dtype(pred.dtype))


def _hist_examples(device: torch.device) -> list[Example]:
    from fusedsim.families.registration.mutual_information_twin import mi_bins

    cases = [  # shape, bins, convention (its centres and sigma), (lo, scale), clamp, pooled
        ((1, 1, 3, 4), 4, "monai", (0.0, 1.0), True, True),  # the smallest: the twin's gradcheck runs on it
        ((1, 1, 7, 9), 16, "monai", (0.0, 1.0), True, True),
        ((2, 3, 6, 5), 7, "fireants", (0.0, 1.0), False, False),
        ((1, 2, 9, 11), 23, "monai", (0.1, 1.3), True, True),  # values pushed past both clamp bounds
        ((1, 2, 4, 5, 6), 32, "fireants_torch", (-0.2, 0.8), True, False),
    ]
    out = []
    for i, (shape, nb, conv, (lo, scale), clamp, pooled) in enumerate(cases):
        x, y = (0.05 + 0.9 * t for t in example_pair(shape, device, 90 + i))  # no value on a clamp bound (a kink)
        centres, preterm = mi_bins(nb, 0.5 if conv == "monai" else 1.0, conv)
        norm = torch.tensor([[lo, scale]] * shape[1], dtype=torch.float64, device=device)
        norm[-1, 1] *= 0.9
        out.append(Example((x, y, norm, centres.to(device)), (preterm, clamp, pooled), grads=(0, 1, 2),
                           note=f"{shape} bins={nb} {conv} norm=({lo}, {scale}) clamp={clamp} pooled={pooled}"))
    return out


parzen_histogram = register_op(KernelOp(
    name="parzen_histogram",
    schema="(Tensor pred, Tensor target, Tensor norm, Tensor centres, float preterm, bool clamp, bool pooled) "
           "-> Tensor",
    n_tensors=4,
    load_triton=_import_triton,
    reference=parzen_histogram_ref,
    fake=_hist_fake,
    examples=_hist_examples,
    # float32: each histogram entry is a mean of products of normalised weights (~1e-7 relative); gradients
    # carry the exp and the bin-centre differences (~1e-6)
    tolerance={torch.float64: (1e-10, 1e-9), torch.float32: (1e-5, 1e-4)},
    doc="Gaussian-Parzen joint histogram (pab, pa, pb) of (N, C, *S) pairs per plane or per image (MONAI's "
        "pooled channels), for mutual information; exact gradients for both images and the intensity map.",
))


