"""This machine's identity (GPU model, driver, CPU) and its JSON cache files under the user cache dir.

The cache folder is ``FUSEDSIM_CACHE_DIR`` when set, else ``platformdirs.user_cache_dir("fusedsim")``. Each
machine identity has its own files (``<kind>-<key>.json``), so a changed GPU or driver starts afresh. Files are
written to a temporary file and renamed into place: a reader never sees half a file, and a corrupt file reads as
empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

from fusedsim.core.state import cached

__all__ = ["cache_dir", "cache_path", "load_json", "machine_identity", "machine_key", "save_json"]

CACHE_DIR_ENV = "FUSEDSIM_CACHE_DIR"


def cache_dir() -> Path:
    """The folder of the engine's caches (created on first write)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("fusedsim"))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@cached(maxsize=1)
def _gpu() -> tuple[str, str]:
    """(GPU model, driver version), or ("none", "none") without a CUDA device."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "none", "none"
        name = torch.cuda.get_device_name(0)
        try:
            driver = str(torch._C._cuda_getDriverVersion())  # the CUDA driver API version the driver supports
        except (AttributeError, RuntimeError):
            driver = "unknown"
        return name, f"{driver} (cuda {torch.version.cuda or torch.version.hip})"
    except Exception:  # noqa: BLE001  (no usable torch/CUDA: a CPU-only identity)
        return "none", "none"


def machine_identity() -> dict[str, Any]:
    """``{"gpu": model, "driver": version, "cpu": model, "cpu_count": n}`` of this machine."""
    gpu, driver = _gpu()
    return {"gpu": gpu, "driver": driver, "cpu": _cpu_model(), "cpu_count": os.cpu_count() or 1}


def machine_key(identity: dict[str, Any] | None = None) -> str:
    """A short stable key of a machine identity (file names)."""
    ident = machine_identity() if identity is None else identity
    text = json.dumps(ident, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(kind: str, identity: dict[str, Any] | None = None) -> Path:
    """The cache file of ``kind`` (``"ladder"``, ``"bench"``) for this machine."""
    return cache_dir() / f"{kind}-{machine_key(identity)}.json"


def load_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when missing or unreadable (a cache is never required)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + rename); errors are ignored (a cache is optional)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fs", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True, allow_nan=False)
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)  # type: ignore[possibly-undefined]
        except (OSError, NameError):
            pass
