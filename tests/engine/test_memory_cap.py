"""A memory cap that a metric without strips cannot keep is said once per metric, not exceeded in silence
(issue 38: ``FUSEDSIM_RAM_CAP_BYTES`` was exceeded 2x by the perceptual metrics without a word)."""

from __future__ import annotations

import warnings

import pytest
import torch

from fusedsim.engine import memory
from fusedsim.engine.memory import RAM_CAP_ENV, MemoryCapWarning, cap_shortfall, warn_cap_once

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _fresh_warnings():
    memory._CAP_WARNED.clear()
    yield
    memory._CAP_WARNED.clear()


def test_no_cap_no_warning_text():
    assert cap_shortfall("ssimulacra2", 1 << 50, CPU, 100_000, 100_000) is None  # free memory: the OOM ladder


def test_working_set_over_the_cap_is_described(monkeypatch):
    monkeypatch.setenv(RAM_CAP_ENV, str(memory.process_rss() + (64 << 20)))
    text = cap_shortfall("ssimulacra2", 1 << 30, CPU, 4000, 6000)
    assert text is not None
    assert RAM_CAP_ENV in text and "ssimulacra2" in text and "no strip path" in text and "6000x4000" in text
    assert cap_shortfall("ssimulacra2", 1 << 10, CPU, 8, 8) is None  # fits


def test_warned_once_per_metric(monkeypatch):
    monkeypatch.setenv(RAM_CAP_ENV, str(memory.process_rss() + (64 << 20)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert warn_cap_once("butteraugli", 1 << 30, CPU, 4000, 6000) is not None
        warn_cap_once("cvvdp", 1 << 30, CPU, 4000, 6000)
        warn_cap_once("psnr", 1 << 10, CPU, 8, 8)
    texts = [str(w.message) for w in caught if issubclass(w.category, MemoryCapWarning)]
    assert len(texts) == 2 and "butteraugli" in texts[0] and "cvvdp" in texts[1]


def test_vram_cap_is_named_for_a_gpu(monkeypatch):
    monkeypatch.setenv(memory.VRAM_CAP_ENV, str(1 << 20))
    text = cap_shortfall("cvvdp", 1 << 30, torch.device("cuda:0"), 4000, 6000)
    assert text is not None and memory.VRAM_CAP_ENV in text


def test_scorer_warns_when_the_cap_cannot_hold_a_metric_without_strips(monkeypatch):
    from engine_pairs import image_pair

    from fusedsim.engine import Scorer

    monkeypatch.setenv(RAM_CAP_ENV, str(memory.process_rss() + (1 << 20)))
    ref, dist = image_pair(64, 80)
    with pytest.warns(MemoryCapWarning, match="ssimulacra2"):
        Scorer(["ssimulacra2"], device="cpu").score(ref, dist)
