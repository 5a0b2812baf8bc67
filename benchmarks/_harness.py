"""Shared benchmark helpers: median GPU time, peak extra memory, environment metadata, JSON output."""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def median_ms(fn: Callable[[], object], warmup_ms: int = 50, rep_ms: int = 200) -> float:
    """Median time of ``fn`` in milliseconds (CUDA events through triton.testing.do_bench)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def peak_extra_mib(fn: Callable[[], object]) -> float:
    """Peak memory allocated while ``fn`` runs, above what was allocated before it, in MiB."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def metadata() -> dict:
    import triton

    props = torch.cuda.get_device_properties(0)
    return {
        "date": datetime.date.today().isoformat(),
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }


def write_json(name: str, payload: dict, extra_dir: str | None = None) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    text = json.dumps(payload, indent=1)
    path.write_text(text)
    if extra_dir:
        (Path(extra_dir) / path.name).write_text(text)
    return path
