"""Public SSIM API: argument checking, backend forcing, reductions, fused-ssim semantics, torch.compile."""

from __future__ import annotations

import pytest
import torch

import fusedsim
from fusedsim.core.backend import BackendUnavailableError


def _pair(shape=(1, 3, 20, 20), dtype=torch.float32):
    x = torch.rand(shape, dtype=dtype)
    return x, (x + 0.1 * torch.rand(shape, dtype=dtype)).clamp(0, 1)


@pytest.mark.parametrize("fn", [fusedsim.ssim, fusedsim.fused_ssim])
def test_mismatched_shapes_name_both_arguments(fn):
    with pytest.raises(ValueError, match="same shape"):
        fn(torch.rand(1, 3, 20, 20), torch.rand(1, 3, 20, 21))


def test_integer_dtype_is_a_type_error():
    x = torch.randint(0, 255, (1, 3, 20, 20), dtype=torch.uint8)
    with pytest.raises(TypeError, match="X must be a floating tensor"):
        fusedsim.ssim(x, x)


def test_wrong_ndim():
    with pytest.raises(ValueError, match=r"img1 must be \(N, C, H, W\)"):
        fusedsim.fused_ssim(torch.rand(3, 20, 20), torch.rand(3, 20, 20))


def test_dtype_mismatch():
    with pytest.raises(TypeError, match="same dtype"):
        fusedsim.ssim(torch.rand(1, 1, 20, 20), torch.rand(1, 1, 20, 20, dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_input_gives_nan_by_default_and_is_named_on_request(bad):
    x, y = _pair()
    y[0, 1, 3, 4] = bad
    assert torch.isnan(fusedsim.ssim(x, y, data_range=1.0))  # the default path never synchronises
    assert torch.isnan(fusedsim.fused_ssim(x, y))
    assert torch.isnan(fusedsim.l1_ssim_loss(x, y))
    with pytest.raises(ValueError, match="Y contains NaN or Inf"):
        fusedsim.ssim(x, y, data_range=1.0, check_finite=True)
    with pytest.raises(ValueError, match="img2 contains NaN or Inf"):
        fusedsim.fused_ssim(x, y, check_finite=True)
    with pytest.raises(ValueError, match="target contains NaN or Inf"):
        fusedsim.l1_ssim_loss(x, y, check_finite=True)


def test_image_smaller_than_window():
    with pytest.raises(ValueError, match="at least 11"):
        fusedsim.ssim(torch.rand(1, 1, 10, 30), torch.rand(1, 1, 10, 30))
    with pytest.raises(ValueError, match="at least 11"):
        fusedsim.fused_ssim(torch.rand(1, 1, 1, 1), torch.rand(1, 1, 1, 1))


def test_image_smaller_than_ms_ssim_pyramid():
    with pytest.raises(ValueError, match="at least 161"):
        fusedsim.ms_ssim(torch.rand(1, 1, 160, 200), torch.rand(1, 1, 160, 200))


@pytest.mark.parametrize("size", [4, 1, 33])
def test_window_size_rules(size):
    x, y = _pair()
    with pytest.raises(ValueError, match="odd integer from 3 to 31"):
        fusedsim.fused_ssim(x, y, window_size=size)


def test_bad_options():
    x, y = _pair()
    with pytest.raises(ValueError, match="padding must be one of"):
        fusedsim.fused_ssim(x, y, padding="reflect")
    with pytest.raises(ValueError, match="data_range must be a finite number > 0"):
        fusedsim.ssim(x, y, data_range=0)
    with pytest.raises(ValueError, match="reduction must be one of"):
        fusedsim.ssim(x, y, reduction="sum")
    with pytest.raises(ValueError, match="not defined for MS-SSIM"):
        fusedsim.ms_ssim(torch.rand(1, 1, 170, 170), torch.rand(1, 1, 170, 170), reduction="none")
    with pytest.raises(ValueError, match="win_sigma"):
        fusedsim.ssim(x, y, win_sigma=-1.0)


def test_different_devices_rejected():
    x, y = _pair()
    meta = torch.empty_like(y, device="meta")
    with pytest.raises(ValueError, match="same device"):
        fusedsim.ssim(x, meta)


def test_forced_triton_without_interpreter_is_an_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, y = _pair()
    with fusedsim.use_backend("triton"), pytest.raises(BackendUnavailableError, match="Triton needs CUDA"):
        fusedsim.ssim(x, y)


def test_backend_environment_variable_is_checked(monkeypatch):
    monkeypatch.setenv("FUSEDSIM_BACKEND", "cuda-please")
    with pytest.raises(ValueError, match="FUSEDSIM_BACKEND must be one of"):
        fusedsim.ssim(*_pair())


def test_backend_environment_variable_is_read_on_every_call(monkeypatch):
    """The variable's parsed values are cached by raw value: a change after earlier calls still takes effect."""
    from fusedsim.core.backend import requested_backend

    monkeypatch.delenv("FUSEDSIM_BACKEND", raising=False)
    assert requested_backend() == "auto"
    monkeypatch.setenv("FUSEDSIM_BACKEND", " Reference ")
    assert requested_backend() == "reference"
    with fusedsim.use_backend("triton"):
        assert requested_backend() == "triton"
    monkeypatch.setenv("FUSEDSIM_BACKEND", "")
    assert requested_backend() == "auto"
    monkeypatch.setenv("FUSEDSIM_BACKEND", "bad")
    for _ in range(2):  # a cached bad value raises again
        with pytest.raises(ValueError, match="FUSEDSIM_BACKEND must be one of"):
            requested_backend()


def test_reductions_shapes_and_consistency():
    x, y = _pair((2, 3, 24, 25))
    per_channel = fusedsim.ssim(x, y, data_range=1.0, reduction="channel")
    assert per_channel.shape == (2, 3)
    torch.testing.assert_close(fusedsim.ssim(x, y, data_range=1.0, size_average=False), per_channel.mean(1))
    torch.testing.assert_close(fusedsim.ssim(x, y, data_range=1.0), per_channel.mean())
    ssim_map = fusedsim.ssim(x, y, data_range=1.0, reduction="none")
    assert ssim_map.shape == (2, 3, 14, 15)
    torch.testing.assert_close(ssim_map.mean((2, 3)), per_channel)
    assert fusedsim.fused_ssim(x, y, reduction="none").shape == x.shape


def test_identical_images_score_one():
    x, _ = _pair((1, 3, 30, 30))
    assert fusedsim.ssim(x, x, data_range=1.0).item() == pytest.approx(1.0, abs=1e-6)
    assert fusedsim.ms_ssim(torch.rand(1, 1, 170, 170), torch.rand(1, 1, 170, 170)).item() < 1.0


def test_train_false_records_no_graph():
    x, y = _pair()
    x.requires_grad_(True)
    assert fusedsim.fused_ssim(x, y, train=False).requires_grad is False
    assert fusedsim.fused_ssim(x, y, train=True).requires_grad is True


def test_autocast_keeps_float32_accumulation():
    x, y = _pair((1, 3, 20, 20))
    expected = fusedsim.ssim(x, y, data_range=1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = fusedsim.ssim(x, y, data_range=1.0)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)


def test_compile_has_no_graph_break_on_kernel_path(kernel_device):
    x, y = _pair((1, 3, 16, 18))  # several channels: the window table must be dense rows under tracing too
    x, y = x.to(kernel_device), y.to(kernel_device)
    x.requires_grad_(True)

    def loss(a, b):
        return 1.0 - fusedsim.fused_ssim(a, b, check_finite=False)

    with fusedsim.use_backend("triton"):
        eager = loss(x, y)
        (g_eager,) = torch.autograd.grad(eager, x)
        compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
        value = compiled(x, y)
        (g_compiled,) = torch.autograd.grad(value, x)
    torch.testing.assert_close(value, eager)
    torch.testing.assert_close(g_compiled, g_eager)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"ssim_weight": 1.5}, ValueError, "ssim_weight must be a number in"),
    ({"ssim_weight": True}, ValueError, "ssim_weight must be a number in"),
    ({"window_size": 4}, ValueError, "window_size must be an odd integer"),
    ({"window_sigma": 0.0}, ValueError, "window_sigma must be a finite number > 0"),
    ({"padding": "reflect"}, ValueError, "padding must be one of"),
    ({"reduction": "none"}, ValueError, "reduction must be one of"),
])
def test_l1_ssim_loss_bad_options_name_the_argument(kwargs, error, message):
    x, y = _pair()
    with pytest.raises(error, match=message):
        fusedsim.l1_ssim_loss(x, y, **kwargs)


def test_l1_ssim_loss_bad_inputs_name_the_argument():
    x, y = _pair()
    with pytest.raises(ValueError, match="pred and target must have the same shape"):
        fusedsim.l1_ssim_loss(x, y[..., :-1])
    with pytest.raises(TypeError, match="target must be a floating tensor"):
        fusedsim.l1_ssim_loss(x, (y * 255).to(torch.uint8))
    with pytest.raises(ValueError, match="at least 11"):
        fusedsim.l1_ssim_loss(x[..., :10], y[..., :10])
