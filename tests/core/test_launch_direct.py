"""The launcher's generated steady-state launch (``_direct_launch``) and its entry per compiled kernel
(``_launch_entry``), checked on the host with stand-ins for tensors, Triton's compiled kernel and its C launch
function; ``test_direct_launch_on_the_gpu`` runs the real thing."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import fusedsim.core.launch as _launch

knobs = pytest.importorskip("triton.knobs")


class FakeTensor:
    """What the generated launch reads of a tensor: its device index and address."""

    def __init__(self, ptr: int, device: int = 0) -> None:
        self.ptr, self.device = ptr, device

    def get_device(self) -> int:
        return self.device

    def data_ptr(self) -> int:
        return self.ptr


class FakeLauncher:
    """The attributes of a bound :class:`Launcher` that ``_direct_launch`` reads."""

    def __init__(self, tensor_pos: tuple[int, ...], raw: bool, grid=(3, 2, 1)) -> None:
        self._tensor_pos, self._raw, self.grid = tensor_pos, raw, grid
        self._compiled: dict = {}
        self._knobs = types.SimpleNamespace(launch_enter_hook=knobs.HookChain(),
                                            launch_exit_hook=knobs.HookChain(reversed=True))
        self._stream_of = lambda device: 1000 + device
        self.kernel = types.SimpleNamespace(__name__="fake_kernel")
        self.slow_calls: list[tuple] = []

    def _call(self, *args) -> None:
        self.slow_calls.append(args)


def _key(device: int, *ptrs: int) -> int:
    key = device
    for p in ptrs:
        key = (key << 1) | (p % 16 == 0)
    return key


@pytest.fixture
def on_device_zero(monkeypatch):
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)


def _direct(launcher: FakeLauncher, n_args: int):
    return _launch._direct_launch(launcher, n_args)  # type: ignore[arg-type]


def test_raw_launch_passes_addresses_and_the_rest_unchanged(on_device_zero):
    launcher = FakeLauncher((0, 2), raw=True)
    seen = []
    head = ("coop", "pdl", None, None, "packed", None, None, None)
    launcher._compiled[_key(0, 4096, 4112)] = ((lambda *a: seen.append(a), "fn", head), None)
    direct = _direct(launcher, 5)
    a, b = FakeTensor(4096), FakeTensor(4112)
    direct(a, 7, b, 1.5, "tail")
    assert seen == [(3, 2, 1, 1000, "fn", *head, 4096, 7, 4112, 1.5, "tail")]
    assert launcher.slow_calls == []


def test_tensor_launch_passes_the_tensors(on_device_zero):
    launcher = FakeLauncher((1,), raw=False)
    seen = []
    launcher._compiled[_key(0, 64)] = ((lambda *a: seen.append(a), "fn", ()), None)
    t = FakeTensor(64)
    _direct(launcher, 2)(5, t)
    assert seen == [(3, 2, 1, 1000, "fn", 5, t)]


def test_without_a_direct_entry_it_uses_tritons_launcher_object(on_device_zero):
    launcher = FakeLauncher((0,), raw=True)
    seen = []
    kernel = types.SimpleNamespace(run=lambda *a: seen.append(a), function="fn", packed_metadata="packed")
    launcher._compiled[_key(0, 32)] = (None, kernel)
    _direct(launcher, 2)(FakeTensor(32), 9)
    assert seen == [(3, 2, 1, 1000, "fn", "packed", None, None, None, 32, 9)]


@pytest.mark.parametrize("case", ["new alignment", "other device", "argument count", "enter hook", "exit hook",
                                  "hook callable"])
def test_everything_else_takes_the_full_path(on_device_zero, case):
    launcher = FakeLauncher((0,), raw=True)
    launched = []
    launcher._compiled[_key(0, 32)] = ((lambda *a: launched.append(a), "fn", ()), None)
    direct = _direct(launcher, 2)
    args = (FakeTensor(32), 9)
    if case == "new alignment":
        args = (FakeTensor(36), 9)  # another alignment bit: a kernel compiled for it may not exist yet
    elif case == "other device":
        args = (FakeTensor(32, device=1), 9)
    elif case == "argument count":
        args = (FakeTensor(32), 9, 10)
    elif case == "enter hook":
        launcher._knobs.launch_enter_hook.add(print)
    elif case == "exit hook":
        launcher._knobs.launch_exit_hook.add(print)
    else:
        launcher._knobs.launch_enter_hook = print  # Triton < 3.5 stores a bare callable
    direct(*args)
    assert launched == []
    assert launcher.slow_calls == [args]


def _fake_compiled(layout: str | None, global_scratch: int = 0, profile_scratch: int = 0):
    module = types.ModuleType("fake_triton_driver")
    if layout is not None:
        module._BASE_ARGS_FORMAT = layout
    sys.modules[module.__name__] = module
    launcher_cls = type("CudaLauncher", (), {"__module__": module.__name__})
    run = launcher_cls()
    run.launch = "c-launch"
    run.launch_cooperative_grid, run.launch_pdl = False, True
    run.global_scratch_size, run.profile_scratch_size = global_scratch, profile_scratch
    return types.SimpleNamespace(run=run, function="fn", packed_metadata=(4, 1, 0))


@pytest.fixture
def fake_driver_module():
    yield
    sys.modules.pop("fake_triton_driver", None)


def test_entry_is_direct_for_the_known_layout(fake_driver_module):
    compiled = _fake_compiled("iiiKKppOOOOOO")
    direct, kernel = _launch._launch_entry(compiled)
    assert kernel is compiled
    assert direct == ("c-launch", "fn", (False, True, None, None, (4, 1, 0), None, None, None))


@pytest.mark.parametrize("layout, scratch", [("iiiKKppOOOO", (0, 0)), (None, (0, 0)), ("iiiKKppOOOOOO", (8, 0)),
                                             ("iiiKKppOOOOOO", (0, 8))])
def test_entry_falls_back_for_other_layouts_and_scratch(fake_driver_module, layout, scratch):
    compiled = _fake_compiled(layout, *scratch)
    assert _launch._launch_entry(compiled) == (None, compiled)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_direct_launch_on_the_gpu():
    """A launcher's later launches (the direct path) compute what its first (Triton's own launch) did, including
    for a misaligned view (another compiled kernel), and an installed launch hook sees them."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_scaled(X, Y, OUT, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(OUT + offs, tl.load(X + offs, mask=mask) + scale * tl.load(Y + offs, mask=mask), mask=mask)

    n = 1000
    base = torch.randn(2 * n + 4, device="cuda")
    y = torch.randn(n, device="cuda")
    launcher = _launch.Launcher(add_scaled, (triton.cdiv(n, 256),), raw_pointers=True)
    for x in (base[:n], base[1:n + 1], base[:n]):  # aligned, misaligned, aligned again
        for scale in (0.5, 2.0):
            out = torch.empty(n, device="cuda")
            launcher(x, y, out, n, scale, 256)
            torch.testing.assert_close(out, x + scale * y, rtol=0, atol=1e-6)
    assert launcher.fast != launcher._call  # the generated launch is bound
    assert len(launcher._compiled) == 2
    seen = []
    hook = knobs.runtime.launch_enter_hook
    if isinstance(hook, knobs.HookChain):
        hook.add(seen.append)
        try:
            launcher(base[:n], y, torch.empty(n, device="cuda"), n, 1.0, 256)
        finally:
            hook.remove(seen.append)
        assert len(seen) == 1


def test_a_launch_that_a_cache_hook_skipped_is_not_kept(on_device_zero):
    """A ``jit_cache_hook`` that returns True skips a compilation and its launch (benchmarks/bench_warmup.py's
    claiming strategies do): Triton then returns None instead of a compiled kernel, and the next launch must ask
    Triton again."""
    calls = []

    class Skipped:
        def __getitem__(self, grid):
            return lambda *args, **options: calls.append(args)  # returns None, as a skipped launch does

    launcher = _launch.Launcher(Skipped(), (1,))
    launcher._fast, launcher._tensor_pos, launcher._first = True, (0,), 0
    for _ in range(2):
        launcher._launch((FakeTensor(32), 4), 0)
    assert len(calls) == 2 and launcher._compiled == {}
