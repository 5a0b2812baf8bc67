"""Kernel-versus-twin comparison shared by the registration loss tests."""

from __future__ import annotations

import torch

from fusedsim.core.backend import use_backend


def _loss_and_grads(loss, backend: str, pred: torch.Tensor, target: torch.Tensor, kw: dict):
    pred, target = pred.detach().clone().requires_grad_(), target.detach().clone().requires_grad_()
    with use_backend(backend):
        out = loss(pred, target, **kw)
    cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(out)
    return out.detach(), torch.autograd.grad(out, (pred, target), cot)


def assert_kernel_matches_twin(loss, pred: torch.Tensor, target: torch.Tensor, kw: dict, device, tolerance) -> None:
    """``loss`` on the Triton backend (``pred``/``target`` in their dtype, on ``device``) against the float64 twin:
    the value within ``tolerance[0]``, both gradients (random cotangent) within ``tolerance[1]`` relative norm."""
    dtype = pred.dtype
    got, got_grads = _loss_and_grads(loss, "triton", pred.to(device), target.to(device), kw)
    ref, ref_grads = _loss_and_grads(loss, "reference", pred.double(), target.double(), kw)
    val_tol, grad_tol = tolerance
    assert got.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    torch.testing.assert_close(got.double().cpu(), ref, atol=val_tol, rtol=val_tol)
    for g, r in zip(got_grads, ref_grads):
        assert g.dtype == dtype and g.shape == r.shape
        rel = ((g.double().cpu() - r).norm() / r.norm()).item()
        assert rel < grad_tol, rel
