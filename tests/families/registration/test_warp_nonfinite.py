"""warp / compose with NaN or Inf in the field: one answer on every backend.

A sampling point with a non-finite coordinate gives NaN in every channel, for every mode and padding, and passes no
gradient (grid_sample has no single answer to copy: on the CPU it gives NaN for bilinear with zero padding, 0 for
nearest and an edge value for border; on CUDA 0). The Triton kernels (through the interpreter without a GPU) must
give exactly the twin's NaN positions, and the twin's values and gradients elsewhere.
"""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.backend import use_backend
from fusedsim.registration import compose, warp

# the interpreter runs the kernels in numpy, which warns about the NaN arithmetic these tests are about
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

CASES = [(nd, mode, pad) for nd in (2, 3) for mode in ("bilinear", "nearest")
         for pad in ("zeros", "border", "reflection")]


def _case(nd: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    shape, lattice = ((2, 2, 7, 8), (5, 6)) if nd == 2 else ((2, 2, 4, 5, 6), (3, 4, 5))
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    a = torch.eye(nd, nd + 1, dtype=torch.float64) + 0.1 * torch.randn(2, nd, nd + 1, generator=gen,
                                                                        dtype=torch.float64)
    u = 0.2 * torch.randn(2, *lattice, nd, generator=gen, dtype=torch.float64)
    flat = u.view(-1, nd)
    flat[0, 0] = float("nan")
    flat[3, nd - 1] = float("inf")
    flat[7, 0] = -float("inf")
    bad = ~torch.isfinite(u).all(-1)
    return x, a, u, bad


def _run(backend, device, x, a, u, **kw):
    leaves = [t.to(device).requires_grad_() for t in (x, a, u)]
    with use_backend(backend):
        out = warp(*leaves, **kw)
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)
    return out.detach().cpu(), [g.cpu() for g in torch.autograd.grad(out, leaves, go)]


@pytest.mark.parametrize("nd,mode,pad", CASES, ids=[f"{n}d-{m}-{p}" for n, m, p in CASES])
def test_non_finite_points_give_nan_on_both_backends(kernel_device, nd, mode, pad):
    x, a, u, bad = _case(nd, seed=CASES.index((nd, mode, pad)))
    kw = {"mode": mode, "padding_mode": pad}
    twin, twin_grads = _run("reference", torch.device("cpu"), x, a, u, **kw)
    kernel, kernel_grads = _run("triton", kernel_device, x, a, u, **kw)
    bad_out = bad[:, None].expand_as(twin)
    assert torch.isnan(twin[bad_out]).all() and torch.isfinite(twin[~bad_out]).all()
    assert torch.equal(torch.isnan(kernel), torch.isnan(twin))
    # elsewhere the same values and gradients as the finite-field tests (test_warp.py: float64 rounding)
    torch.testing.assert_close(kernel, twin, rtol=1e-12, atol=1e-12, equal_nan=True)
    for name, got, want in zip(("image", "affine", "field"), kernel_grads, twin_grads):
        assert torch.isfinite(want).all(), name
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)
    assert (twin_grads[2][bad] == 0).all()  # no gradient from a non-finite point


@pytest.mark.parametrize("add_v", [True, False])
def test_compose_with_a_non_finite_field(kernel_device, add_v):
    _, _, v, bad = _case(2, seed=20)
    u = 0.1 * torch.randn(v.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with use_backend("reference"):
        twin = compose(u, v, add_v=add_v)
    with use_backend("triton"):
        kernel = compose(u.to(kernel_device), v.to(kernel_device), add_v=add_v).cpu()
    assert torch.isnan(twin[bad]).all() and torch.isfinite(twin[~bad]).all()
    torch.testing.assert_close(kernel, twin, rtol=1e-12, atol=1e-12, equal_nan=True)
