"""numba's vector width on AVX-512 hosts (:mod:`fusedsim.core.cpu.vector_width`): LLVM's 256-bit preference is
dropped only where the host has AVX-512 and the user has not chosen numba's target, and never twice."""

from __future__ import annotations

import pytest

pytest.importorskip("numba")

from numba import config  # noqa: E402

from fusedsim.core.cpu import vector_width  # noqa: E402


@pytest.fixture
def fresh_config(monkeypatch):
    monkeypatch.delenv("NUMBA_CPU_FEATURES", raising=False)
    monkeypatch.delenv("NUMBA_CPU_NAME", raising=False)
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    return monkeypatch


def test_avx512_hosts_drop_the_256_bit_preference(fresh_config):
    fresh_config.setattr("numba.core.codegen.get_host_cpu_features", lambda: "+avx2,+avx512f,+fma")
    assert vector_width.prefer_full_vector_width()
    assert config.CPU_FEATURES == "+avx2,+avx512f,+fma,-prefer-256-bit"
    assert vector_width.prefer_full_vector_width()  # already set: unchanged
    assert config.CPU_FEATURES.count("-prefer-256-bit") == 1


def test_hosts_without_avx512_are_left_alone(fresh_config):
    fresh_config.setattr("numba.core.codegen.get_host_cpu_features", lambda: "+avx2,-avx512f,+fma")
    assert not vector_width.prefer_full_vector_width()
    assert config.CPU_FEATURES is None


def test_the_users_numba_target_wins(fresh_config):
    fresh_config.setenv("NUMBA_CPU_FEATURES", "+avx2")
    fresh_config.setattr("numba.core.codegen.get_host_cpu_features", lambda: "+avx512f")
    assert not vector_width.prefer_full_vector_width()
    assert config.CPU_FEATURES is None
