"""Triton's compiler key, remembered across processes.

Before a process can use Triton's on-disk kernel cache, Triton computes ``triton_key()``: a SHA-256 of its own
sources and of its compiled library (``libtriton.so``, hundreds of MB). That costs about 0.3-0.4 s in every process
(measured on the H200 machine), which a one-frame ``fusedsim vmaf`` or ``fusedsim score`` call pays on top of the
torch import. This module stores the key in Triton's cache directory, under a name derived from the size and
modification time of every file that goes into it, and installs a ``triton_key`` that reads it back: a changed
or reinstalled Triton has other stamps and recomputes the key. The value is Triton's own, so cache hits and misses
are exactly Triton's. (Triton's own compile workers replace ``triton.runtime.cache.triton_key`` the same way.)
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

__all__ = ["install_triton_key_cache"]

_MODULES = ("triton.runtime.cache", "triton.compiler.compiler", "triton.runtime.autotuner")


def _stamp(root: Path) -> str:
    """Hash of (path, size, mtime) of Triton's Python sources and libraries: cheap, and changes with them."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith((".py", ".so", ".pyd", ".dylib")):
                st = os.stat(os.path.join(dirpath, name))
                digest.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def _cache_dir() -> Path:
    env = os.environ.get("TRITON_CACHE_DIR")
    return Path(env) if env else Path.home() / ".triton" / "cache"


def install_triton_key_cache() -> None:
    """Replace ``triton_key`` in Triton's modules by a disk-backed copy (once per process; never raises)."""
    import importlib
    import sys

    try:
        import triton
        from triton.runtime import cache
    except ImportError:
        return
    original = getattr(cache, "triton_key", None)
    if original is None or getattr(original, "fusedsim_cached", False):
        return
    try:
        path = _cache_dir() / f"fusedsim-triton-key-{triton.__version__}-{_stamp(Path(triton.__file__).parent)}.txt"
    except OSError:
        return

    @functools.lru_cache(maxsize=None)
    def triton_key() -> str:
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            pass
        key = original()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(key, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache directory: compute it per process, as Triton does
        return key

    triton_key.fusedsim_cached = True  # type: ignore[attr-defined]
    for name in _MODULES:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        if getattr(module, "triton_key", None) is original:
            module.triton_key = triton_key
