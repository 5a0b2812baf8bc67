"""This machine's identity (GPU model, driver, CPU) and its JSON cache files under the user cache dir.

The cache folder is ``FUSEDSIM_CACHE_DIR`` when set, else ``platformdirs.user_cache_dir("fusedsim")``. Each
machine identity has its own files (``<kind>-<key>.json``), so a changed GPU or driver starts afresh. Files are
written to a temporary file and renamed into place: a reader never sees half a file. A file that is not valid
JSON, or that its reader's validator rejects (a hand edit, another tool, a disk error), reads as empty with one
:class:`CacheFileWarning` naming it: a cache is never required, so a bad one must not stop ``score``; the next
write replaces it. A failed write returns its reason: the ladder warns and goes on, ``bench`` raises
:class:`CacheWriteError` (its cache is the command's product).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fusedsim.core.state import cached

__all__ = ["CacheFileWarning", "CacheWriteError", "cache_dir", "cache_path", "load_json", "machine_identity",
           "machine_key", "report_bad_cache", "save_json"]

CACHE_DIR_ENV = "FUSEDSIM_CACHE_DIR"

#: a validator of a cache file's JSON: None when it is usable, else why not
Validator = Callable[[Any], "str | None"]


class CacheFileWarning(UserWarning):
    """A cache file was ignored (malformed) or could not be written."""


class CacheWriteError(RuntimeError):
    """A cache that is the product of a command (``fusedsim bench``) could not be written."""


_REPORTED: set[tuple[str, str]] = set()  # (path, reason) already warned about in this process


def cache_dir() -> Path:
    """The folder of the engine's caches (created on first write)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("fusedsim"))


@cached(maxsize=1)
def _cpu_model() -> str:
    """The CPU's model name (read once: every scoring call's ladder lookup names the machine)."""
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


def report_bad_cache(path: Path, reason: str) -> None:
    """Warn once per process that the cache file ``path`` is ignored because of ``reason``: every ``score`` reads
    the ladder, and one line per call would drown the output."""
    key = (str(path), reason)
    if key in _REPORTED:
        return
    _REPORTED.add(key)
    warnings.warn(f"ignoring the cache file {path}: {reason} (it is replaced on the next write; delete it to "
                  "silence this)", CacheFileWarning, stacklevel=3)


def load_json(path: Path, validate: Validator | None = None) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when missing, and ``{}`` with a :class:`CacheFileWarning` when it cannot
    be read, is not a JSON object, or ``validate`` rejects it (a cache is never required)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (FileNotFoundError, NotADirectoryError):  # no cache yet
        return {}
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        report_bad_cache(path, f"not readable as JSON ({exc})")
        return {}
    reason = "not a JSON object" if not isinstance(data, dict) else validate(data) if validate else None
    if reason:
        report_bad_cache(path, reason)
        return {}
    return data


def save_json(path: Path, data: dict[str, Any]) -> str | None:
    """Write ``data`` to ``path`` atomically (temporary file + rename); None when written, else why not (the
    caller decides whether an unsaved cache matters)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fs", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True, allow_nan=False)
        os.replace(tmp, path)
    except (OSError, ValueError) as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return f"{type(exc).__name__}: {exc}" if isinstance(exc, ValueError) else (exc.strerror or str(exc))
    return None
