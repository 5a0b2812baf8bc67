"""The disk-backed Triton compiler key: same value as Triton's, read back by a later process, and refreshed when
Triton's files change."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")

SNIPPET = """
import triton.runtime.cache as c
original = c.triton_key
from fusedsim.core.triton_key import install_triton_key_cache
install_triton_key_cache()
assert c.triton_key is not original
assert c.triton_key() == original(), "the cached key differs from Triton's"
"""


def _run(tmp_path):
    env = {"TRITON_CACHE_DIR": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, env=env)


def test_cached_key_equals_tritons_and_is_stored(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    stored = list(tmp_path.glob("fusedsim-triton-key-*.txt"))
    assert len(stored) == 1
    from triton.runtime.cache import triton_key

    assert stored[0].read_text() == triton_key()


def test_stored_key_is_read_back_and_a_changed_stamp_recomputes(tmp_path, monkeypatch):
    import fusedsim.core.triton_key as _triton_key

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    import triton.runtime.cache as cache

    calls = []
    fake_original = lambda: calls.append(1) or "KEY-1"  # noqa: E731
    monkeypatch.setattr(cache, "triton_key", fake_original)
    _triton_key.install_triton_key_cache()
    assert cache.triton_key() == "KEY-1" and calls == [1]
    # a "new process": a fresh install over another original reads the stored value
    monkeypatch.setattr(cache, "triton_key", lambda: calls.append(2) or "KEY-2")
    _triton_key.install_triton_key_cache()
    assert cache.triton_key() == "KEY-1" and calls == [1]
    # Triton's files changed: another stamp, so the key is recomputed
    monkeypatch.setattr(_triton_key, "_stamp", lambda root: "changed")
    monkeypatch.setattr(cache, "triton_key", lambda: calls.append(3) or "KEY-3")
    _triton_key.install_triton_key_cache()
    assert cache.triton_key() == "KEY-3" and calls == [1, 3]
