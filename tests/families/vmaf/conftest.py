from __future__ import annotations

import pytest
from vmaf_clips import load_pairs


@pytest.fixture(scope="session")
def vmaf_pairs(refdata):
    pairs = load_pairs(refdata)
    assert len(pairs) == 9 and sum(p.n for p in pairs) == 39, "refdata/vmaf: expected 9 pairs, 39 frames"
    return pairs


def pytest_generate_tests(metafunc):
    """``pair_name`` parametrises over the fixture pairs (names only, so collection needs no data)."""
    if "pair_name" in metafunc.fixturenames:
        names = ["a576x324_8b_blur", "a576x324_8b_jpeg", "a576x324_8b_noise", "a576x324_8b_shift",
                 "c333x217_8b_jpeg", "c333x217_8b_mixed", "d504x400_10b_blurnoise", "d504x400_10b_jpeg8",
                 "e333x217_10b_mixed"]
        metafunc.parametrize("pair_name", names)


@pytest.fixture
def pair(vmaf_pairs, pair_name):
    return next(p for p in vmaf_pairs if p.name == pair_name)
