"""Backend dispatch: Triton kernels for GPU tensors, PyTorch twins elsewhere.

``FUSEDSIM_BACKEND=auto|reference|triton`` (or the :func:`use_backend` context manager, which wins over the
environment) picks the implementation. ``auto`` runs the Triton kernels on CUDA/ROCm tensors when Triton is
importable and the PyTorch twin otherwise. Forcing ``triton`` where it cannot run is an error, never a silent
fallback: on CPU tensors it needs Triton's interpreter (``TRITON_INTERPRET=1`` set before import).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

import torch

from fusedsim.core.state import cache_dict

BACKENDS = ("auto", "reference", "triton")
_ENV_VAR = "FUSEDSIM_BACKEND"
_forced: contextvars.ContextVar[str | None] = contextvars.ContextVar("fusedsim_backend", default=None)


class BackendUnavailableError(RuntimeError):
    """A forced backend cannot run on the given tensors."""


def _check_name(name: str, source: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{source} must be one of {', '.join(BACKENDS)}; got {name!r}")
    return name


def _constant_under_compile(fn):
    """``torch.compile`` evaluates ``fn`` once while tracing (the backend is fixed per compiled graph).

    This is what ``torch.compiler.assume_constant_result`` does (it sets the marker attribute), without calling
    it: that function lives in ``torch._dynamo``, whose import costs about a second that eager users and the CLI
    should not pay."""
    fn._dynamo_marked_constant = True
    return fn


@_constant_under_compile
def requested_backend() -> str:
    """The backend asked for: the innermost :func:`use_backend`, else ``$FUSEDSIM_BACKEND``, else ``auto``."""
    forced = _forced.get()
    if forced is not None:
        return forced
    try:  # os.environ's own dict: its get() encodes the key on every call, half a microsecond of a hot path
        raw = os.environ._data.get(_ENV_KEY)  # type: ignore[attr-defined]
    except AttributeError:  # os.environ replaced by another mapping
        raw = os.environ.get(_ENV_VAR)
    name = _parsed_env.get(raw)
    if name is None:
        text = raw.decode() if isinstance(raw, bytes) else (raw or "")
        name = _parsed_env[raw] = _check_name(text.strip().lower() or "auto", _ENV_VAR)
    return name


# the environment variable as os.environ stores it, and its checked values by raw value
_ENV_KEY = os.environ.encodekey(_ENV_VAR) if hasattr(os.environ, "encodekey") else _ENV_VAR
_parsed_env: dict = cache_dict()


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Force ``auto``, ``reference`` or ``triton`` inside a ``with`` block."""
    token = _forced.set(_check_name(name, "backend"))
    try:
        yield
    finally:
        _forced.reset(token)


_triton_importable: bool | None = None


def triton_available() -> bool:
    """Whether Triton imports (checked once; a plain global rather than lru_cache, which torch.compile traces)."""
    global _triton_importable
    if _triton_importable is None:
        try:
            import triton  # noqa: F401
            import triton.language  # noqa: F401

            _triton_importable = True
        except Exception:  # pragma: no cover - depends on the install
            _triton_importable = False
    return _triton_importable


@_constant_under_compile
def triton_interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_can_run(device: torch.device) -> bool:
    """Triton runs on CUDA/ROCm tensors, and on CPU tensors only through its interpreter."""
    if not triton_available():
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and triton_interpreting()


def choose_backend(*tensors: torch.Tensor, op: str = "this operation", triton_supported: bool = True) -> str:
    """Return ``"triton"`` or ``"reference"`` for an op on ``tensors``.

    ``triton_supported=False`` says the op (or the option set asked for) has no kernel: ``auto`` then uses the
    twin, and a forced ``triton`` raises instead of substituting.
    """
    device = tensors[0].device
    wanted = requested_backend()
    if wanted == "reference":
        return "reference"
    if wanted == "triton":
        if not triton_supported:
            raise BackendUnavailableError(f"backend 'triton' was forced, but {op} has no Triton kernel")
        if not triton_can_run(device):
            why = "Triton is not installed" if not triton_available() else (
                f"tensors are on {device.type}; Triton needs CUDA/ROCm tensors, or TRITON_INTERPRET=1 for CPU")
            raise BackendUnavailableError(f"backend 'triton' was forced for {op}, but {why}")
        return "triton"
    if triton_supported and device.type == "cuda" and triton_available():
        return "triton"
    return "reference"
