"""Engine tests write their caches into a temporary folder and never see a fault hook left by another test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_engine(tmp_path, monkeypatch):
    from fusedsim.engine.ladder import set_fault_hook

    monkeypatch.setenv("FUSEDSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FUSEDSIM_RAM_CAP_BYTES", raising=False)
    monkeypatch.delenv("FUSEDSIM_VRAM_CAP_BYTES", raising=False)
    previous = set_fault_hook(None)
    yield
    set_fault_hook(previous)
