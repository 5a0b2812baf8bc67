"""Triton SSIM kernels against the PyTorch twin: values and both gradients (random cotangents), odd sizes,
several blocks, batch/channels > 1, non-contiguous inputs, 16-bit inputs, 2-D and 3-D.

Runs on the GPU when there is one, else on the CPU through Triton's interpreter (small sizes).
"""

from __future__ import annotations

import pytest
import torch

import fusedsim

# Tolerances: float64 runs the same formulas in a different order (rounding ~1e-15, amplified by the variance
# cancellation to ~1e-11). float32 against a float64 twin: ~1e-7 relative per statistic, up to ~1e-5 on SSIM and
# ~1e-4 on gradients in flat regions where sigma² = E[x²] - mu² cancels.
# Gradients of 16-bit inputs are returned in that dtype, so they carry its rounding (2**-11 for float16,
# 2**-8 for bfloat16, relative) on top.
TOL = {torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4), torch.float16: (2e-5, 1e-3),
       torch.bfloat16: (2e-5, 8e-3)}


def _pair(shape, device, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


def _run(fn, backend, x, y, cotangent_seed=1, both=True):
    xr = x.detach().clone().requires_grad_(True)
    yr = y.detach().clone().requires_grad_(both)
    with fusedsim.use_backend(backend):
        out = fn(xr, yr)
    gen = torch.Generator().manual_seed(cotangent_seed)
    cot = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
    grads = torch.autograd.grad(out, (xr, yr) if both else (xr,), cot)
    return out.detach(), grads


def _compare(fn, x, y, both=True, dtype=torch.float64):
    """Kernel on (x, y) in ``dtype`` against the twin in float64 on the same values."""
    got, got_g = _run(fn, "triton", x.to(dtype), y.to(dtype), both=both)
    ref, ref_g = _run(fn, "reference", x.double().cpu(), y.double().cpu(), both=both)
    val_tol, grad_tol = TOL[dtype]
    torch.testing.assert_close(got.double().cpu(), ref, atol=val_tol, rtol=val_tol)
    for g, r in zip(got_g, ref_g):
        assert g.shape == r.shape and g.dtype == dtype
        err = ((g.double().cpu() - r).norm() / r.norm().clamp_min(1e-30)).item()
        assert err < grad_tol, err


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("shape", [(1, 1, 11, 11), (2, 3, 13, 17)])
def test_fused_ssim_values_and_grads(kernel_device, shape, padding):
    x, y = _pair(shape, kernel_device)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, padding=padding, reduction="channel"), x, y)


def test_map_output_and_map_gradient_prime_sizes(kernel_device):
    x, y = _pair((1, 2, 31, 37), kernel_device, seed=2)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, padding="valid", reduction="none"), x, y)
    _compare(lambda a, b: fusedsim.ssim(a, b, data_range=1.0, win_size=7, reduction="none"), x, y)


def test_several_blocks_and_row_segments(kernel_device):
    # 133 columns > one 128-wide strip, 70 rows > one 64-row segment
    x, y = _pair((1, 1, 70, 133), kernel_device, seed=3)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, window_size=3, reduction="image"), x, y)


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_interior_and_edge_programs(kernel_device, padding):
    # 300 columns: the middle column strips read no out-of-image column and take the unmasked load path
    x, y = _pair((1, 1, 20, 300), kernel_device, seed=10)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, padding=padding, reduction="image"), x, y)


def test_only_first_input_requires_grad(kernel_device):
    x, y = _pair((2, 1, 12, 15), kernel_device, seed=4)
    _compare(lambda a, b: fusedsim.ssim(a, b, data_range=1.0, win_size=5, size_average=False), x, y, both=False)


def test_non_contiguous_inputs(kernel_device):
    big_x, big_y = _pair((2, 3, 30, 36), kernel_device, seed=5)
    x = big_x[:, :, 3:28, ::2]  # sliced rows, stride-2 columns
    y = big_y.to(memory_format=torch.channels_last)[:, :, 3:28, 1::2]
    assert not x.is_contiguous() and not y.is_contiguous()
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, window_size=9, reduction="channel"), x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_inputs_accumulate_in_float32(kernel_device, dtype):
    x, y = _pair((1, 2, 16, 19), kernel_device, seed=6)
    x, y = x.to(dtype).double(), y.to(dtype).double()  # values representable in `dtype`
    _compare(lambda a, b: fusedsim.ssim(a, b, data_range=1.0, win_size=5, reduction="channel"), x, y, dtype=dtype)


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_3d_volumes(kernel_device, padding):
    x, y = _pair((1, 2, 9, 8, 10), kernel_device, seed=7)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, padding=padding, window_size=3, reduction="channel"), x, y)


def test_ms_ssim_kernels_match_twin(kernel_device):
    x, y = _pair((2, 2, 21, 23), kernel_device, seed=8)
    _compare(lambda a, b: fusedsim.ms_ssim(a, b, data_range=1.0, win_size=3, weights=[0.3, 0.3, 0.4],
                                           size_average=False), x, y)


def test_asymmetric_window_gradient_uses_flipped_taps(kernel_device):
    x, y = _pair((1, 1, 14, 16), kernel_device, seed=9)
    win = torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15], dtype=torch.float64)
    _compare(lambda a, b: fusedsim.ssim(a, b, data_range=1.0, win=win, reduction="channel"), x, y)


@pytest.mark.parametrize("unroll", [True, False])
def test_loop_variants_agree(kernel_device, monkeypatch, unroll):
    from fusedsim.ops import ssim as ops

    monkeypatch.setitem(ops.CONFIG, "fwd_unroll", unroll)
    monkeypatch.setitem(ops.CONFIG, "bwd_unroll", unroll)
    x, y = _pair((1, 2, 15, 40), kernel_device, seed=11)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, window_size=7, reduction="channel"), x, y)


def test_runs_on_the_current_cuda_stream(kernel_device):
    if kernel_device.type != "cuda":
        pytest.skip("needs a GPU")
    x, y = _pair((2, 3, 64, 80), kernel_device, dtype=torch.float32, seed=12)
    expected = fusedsim.fused_ssim(x, y)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = fusedsim.fused_ssim(x, y, check_finite=False)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    torch.testing.assert_close(got, expected)
