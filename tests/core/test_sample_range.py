"""Integer samples within their bit depth (:mod:`fusedsim.core.sample_range`): the error names the argument and an
offending sample, uint16 samples read through int16 keep their value, several planes are checked in one go, and
inside ``sample_ranges_checked`` the per-feature check is skipped (its caller checked the planes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fusedsim.core.sample_range import check_sample_range, check_sample_ranges, sample_ranges_checked
from fusedsim.families.vmaf.feature_requests import FeatureRequest
from fusedsim.families.vmaf.session import FeatureSession


def test_the_error_names_the_argument_and_a_sample_outside():
    frames = torch.tensor([[[0, 1023], [1024, 7]]], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"dist holds the sample 1024, outside \[0, 1023\] for 10-bit samples"):
        check_sample_range(frames, "dist", 10)
    with pytest.raises(ValueError, match=r"ref holds the sample -3, outside"):
        check_sample_range(frames - 3, "ref", 10)
    check_sample_range(frames.clamp(max=1023), "ref", 10)  # within range: no error


def test_uint16_samples_and_their_int16_storage_report_the_real_value():
    values = torch.tensor([[[5, 40000]]], dtype=torch.int32)
    with pytest.raises(ValueError, match="holds the sample 40000"):
        check_sample_range(values.to(torch.uint16), "ref", 12)
    stored = torch.from_numpy(np.array([[[5, 40000]]], dtype=np.uint16).view(np.int16))
    with pytest.raises(ValueError, match="holds the sample 40000"):
        check_sample_range(stored, "ref", 12, wrapped=True)
    check_sample_range(values.to(torch.uint16), "ref", 16)  # every uint16 value is a 16-bit sample


def test_several_planes_at_once_name_the_bad_one():
    good = torch.full((1, 4, 4), 200, dtype=torch.uint8)
    bad = torch.full((1, 2, 2), 300, dtype=torch.int16)
    check_sample_ranges([("ref_y", good), ("ref_u", bad.clamp(max=255))], 8)
    with pytest.raises(ValueError, match=r"dist_u holds the sample 300, outside \[0, 255\]"):
        check_sample_ranges([("ref_y", good), ("dist_u", bad)], 8)


def test_checks_inside_a_checked_scope_are_skipped():
    bad = torch.full((1, 2, 2), 300, dtype=torch.int16)
    with sample_ranges_checked():
        check_sample_range(bad, "dist", 8)
    with pytest.raises(ValueError):
        check_sample_range(bad, "dist", 8)


def test_a_feature_session_checks_every_plane_it_is_given():
    # the session checks all planes once and then lets its features skip their own checks: a chroma plane out of
    # range is still refused, named, though the luma-only feature would not have read it
    y = torch.full((1, 64, 64), 100, dtype=torch.int16)
    u = torch.full((1, 32, 32), 100, dtype=torch.int16)
    session = FeatureSession([FeatureRequest.of("adm", {})], 8)
    with pytest.raises(ValueError, match=r"dist_v holds the sample 256, outside \[0, 255\]"):
        session.push([y, u, u], [y, u, u + 156])
