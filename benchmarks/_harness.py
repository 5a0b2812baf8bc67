"""Shared benchmark helpers: median GPU time, peak extra memory, fresh random inputs, environment metadata,
optional peers, JSON output.

Every helper also works on the CPU (timed with ``time.perf_counter``) so that a ``--device cpu --quick`` smoke
run proves the code paths without a GPU; CPU numbers mean nothing for speed.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import torch

RESULTS = Path(__file__).resolve().parent / "results"
SLOW_CALL_MS = 100.0  # above this per call, do_bench's fixed minimum of ~8 calls costs seconds: time 3 calls


def median_ms(fn: Callable[[], object], warmup_ms: int = 50, rep_ms: int = 200, *,
              grad_to_none: Sequence[torch.Tensor] | None = None, device: str = "cuda") -> float:
    """Median time of ``fn`` in milliseconds.

    CUDA: ``triton.testing.do_bench`` (CUDA events around each call, L2 flushed before each call, so host time
    shows up whenever the host cannot keep ahead of the GPU). Calls slower than ``SLOW_CALL_MS`` (slow peers
    at large shapes) are timed three times instead. CPU: ``perf_counter`` medians, for smoke runs only.
    """
    if device != "cuda":
        return _cpu_median_ms(fn, rep_ms, grad_to_none)
    fn()  # compile / autotune / allocator warm-up stay out of every number
    torch.cuda.synchronize()
    single = _event_ms(fn, grad_to_none)
    if single > SLOW_CALL_MS:
        return statistics.median([single] + [_event_ms(fn, grad_to_none) for _ in range(2)])
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, grad_to_none=list(grad_to_none or []) or None,
                          return_mode="median"))


def _event_ms(fn: Callable[[], object], grad_to_none: Sequence[torch.Tensor] | None) -> float:
    _clear_grads(grad_to_none)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _cpu_median_ms(fn: Callable[[], object], rep_ms: int, grad_to_none: Sequence[torch.Tensor] | None) -> float:
    fn()
    times: list[float] = []
    budget_end = time.perf_counter() + rep_ms / 1e3
    while len(times) < 3 or (time.perf_counter() < budget_end and len(times) < 50):
        _clear_grads(grad_to_none)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _clear_grads(tensors: Sequence[torch.Tensor] | None) -> None:
    for t in tensors or ():
        t.grad = None


def kernel_times_us(fn: Callable[[], object], calls: int) -> list[float]:
    """GPU time (µs) of every kernel ``fn`` launches over ``calls`` calls, in launch order (torch.profiler: no host
    time, no L2 flush)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def peak_extra_mib(fn: Callable[[], object], device: str = "cuda") -> float | None:
    """Peak memory allocated while ``fn`` runs, above what was allocated before it, in MiB (None off CUDA)."""
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def random_pair(shape: Sequence[int], device: str, dtype: torch.dtype = torch.float32,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh image pair in [0, 1]: uniform noise and a noisy copy (never zeros, never identical)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand(tuple(shape), device=device, generator=gen)
    y = (x + 0.1 * torch.randn(tuple(shape), device=device, generator=gen)).clamp_(0, 1)
    return x.to(dtype), y.to(dtype)


def uint8_pair(height: int, width: int, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh sRGB uint8 pair (1, 3, H, W): a smooth random image with texture, and a noisy, shifted copy (what
    a codec sweep scores; never zeros, never identical). Drawn on the CPU, so a seed gives the same pair on every
    device (the GPU-vs-CPU check compares one pair)."""
    gen = torch.Generator().manual_seed(seed)
    low = torch.rand(1, 3, max(2, height // 16), max(2, width // 16), generator=gen)
    base = torch.nn.functional.interpolate(low, size=(height, width), mode="bilinear", align_corners=False)
    base = base * 0.8 + 0.2 * torch.rand(1, 3, height, width, generator=gen)
    dist = base + 0.03 * torch.randn(base.shape, generator=gen) + 0.01
    return _to_uint8(base).to(device), _to_uint8(dist).to(device)


def _to_uint8(x: torch.Tensor) -> torch.Tensor:
    return (x.clamp(0, 1) * 255).round().to(torch.uint8)


def optional_import(name: str) -> ModuleType | str:
    """The module, or a one-line reason why it cannot be imported (a missing peer is recorded, never fatal)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # ImportError, or a broken build raising anything at import
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def available(specs: Sequence[tuple[str, object, Callable[[], object]]], skip: set[str]
              ) -> tuple[list, dict[str, str]]:
    """Build each (name, module or import-failure text, build) spec not skipped; returns the built providers and
    name -> reason for those that cannot be loaded (never fatal: a missing peer is a row in the report)."""
    built: list = []
    missing: dict[str, str] = {}
    for name, module, build in specs:
        if name in skip:
            continue
        if isinstance(module, str):
            missing[name] = module
            continue
        try:
            built.append(build())
        except AttributeError as exc:  # e.g. a function an older checkout does not have
            missing[name] = f"AttributeError: {exc}"
    return built, missing


def version_of(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def package_dir(name: str) -> str | None:
    """Where a package would be imported from (without importing it): says which src/ was measured."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    return str(Path(spec.origin).parent) if spec and spec.origin else None


def parse_skip(text: str) -> set[str]:
    return {s.strip() for s in text.split(",") if s.strip()}


def metadata(device: str = "cuda") -> dict:
    """Where and with what the numbers were taken: an absolute time means something only with its GPU."""
    meta: dict = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": device,
        "torch": torch.__version__,
        "triton": version_of("triton"),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "env": {k: os.environ[k] for k in ("FUSEDSIM_BACKEND", "TRITON_INTERPRET") if k in os.environ},
        "fusedsim": package_dir("fusedsim"),
        "peers": {d: version_of(d) for d in ("fused-ssim", "fused_ssim", "pytorch-msssim", "torchmetrics")},
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        meta.update(gpu=props.name, sm_count=props.multi_processor_count,
                    gpu_memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    return meta


def run_stamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def write_json(name: str, payload: dict, extra_dir: str | None = None, results_dir: Path = RESULTS,
               stamp: str | None = None) -> Path:
    """Write ``results/<name>-<stamp>.json`` and, when given (``$OUT`` on the device machine), a copy there.
    Smoke runs pass a temporary ``results_dir`` so that meaningless CPU numbers never land in ``results/``; a
    fixed ``stamp`` lets a long run rewrite one file after each part (a run cut short keeps what it measured)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = stamp or run_stamp()
    path = results_dir / f"{name}-{stamp}.json"
    text = json.dumps(payload, indent=1)
    path.write_text(text)
    if extra_dir:
        Path(extra_dir).mkdir(parents=True, exist_ok=True)
        (Path(extra_dir) / path.name).write_text(text)
    return path


def smoke_dir() -> Path:
    """Where CPU smoke runs write their JSON (never ``results/``)."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / "fusedsim-bench-smoke"


def fmt(value: object, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float) else ("-" if value is None else str(value))


def add_bytecode_option(parser) -> None:
    """``--bytecode cached|as-is`` for the scripts that time whole processes (see :func:`process_env`)."""
    parser.add_argument("--bytecode", choices=("cached", "as-is"), default="cached",
                        help="cached (default): every timed process keeps byte-code in one cache folder "
                             "(PYTHONPYCACHEPREFIX), as an installed package and its dependencies do after "
                             "`pip install`; as-is: the interpreter's own setting (a tree without .pyc files and "
                             "PYTHONDONTWRITEBYTECODE recompiles every module in every process)")


def process_env(bytecode: str, cache_root: Path) -> dict[str, str]:
    """Environment of the timed processes: with ``bytecode == "cached"``, byte-code is written to and read from
    ``cache_root / "pycache"`` (the warm-up round fills it), whatever PYTHONDONTWRITEBYTECODE says."""
    env = dict(os.environ)
    if bytecode == "cached":
        env["PYTHONPYCACHEPREFIX"] = str(cache_root / "pycache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env
