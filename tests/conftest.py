"""Test set-up shared by every test module.

Kernel tests run the Triton kernels: on a GPU machine on CUDA tensors, elsewhere on CPU tensors through Triton's
interpreter. The interpreter must be switched on before Triton is first imported, so this happens here.
"""

from __future__ import annotations

import os
from pathlib import Path

# Under pytest-xdist each worker gets its share of the cores: with every worker's torch, OpenMP and numba pools
# sized to the whole machine, 16 workers run 256 threads on 16 cores, and the CPU twins inside the GPU suite ran
# 10-20x slower than alone (measured on a 16-core GPU machine: 200+ s for one float64 gradcheck).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1:
    _SHARE = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, _SHARE)

import torch  # noqa: E402

if _WORKERS > 1:
    torch.set_num_threads(int(_SHARE))
    try:  # numba's default, not its pool size (NUMBA_NUM_THREADS): tests may still ask for more threads
        import numba

        numba.set_num_threads(min(int(_SHARE), numba.config.NUMBA_NUM_THREADS))
    except ImportError:  # pragma: no cover - numba is a dependency
        pass

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # Import Triton now, while the interpreter is on: `import fusedsim` no longer imports it, and a test that
    # switches TRITON_INTERPRET off for a moment must not be the first to import it (Triton would keep that mode).
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - Triton is in the dev extra
        pass

import pytest  # noqa: E402

# FUSEDSIM_REFDATA when set, else ../shared/refdata beside the checkout (CI clones main beside a copy of shared/)
REFDATA = Path(os.environ.get("FUSEDSIM_REFDATA") or Path(__file__).resolve().parents[2] / "shared" / "refdata")


@pytest.fixture(scope="session")
def refdata() -> Path:
    if not REFDATA.is_dir():
        pytest.skip(f"reference data folder not found at {REFDATA} (set FUSEDSIM_REFDATA)")
    return REFDATA


@pytest.fixture(scope="session")
def kernel_device() -> torch.device:
    """Where Triton kernels run in this session: the GPU when there is one, else the CPU via the interpreter."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with ``--dist loadgroup`` (README's GPU command), tests that compile the same kernels run
    on one worker: each test module is a group unless a test names its own (the op twin tests group by op). On a
    fresh GPU machine compilation dominates the run, and a kernel compiled by two workers is compiled twice."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
