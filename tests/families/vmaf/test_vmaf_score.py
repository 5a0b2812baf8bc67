"""The VMAF score end to end: ``fusedsim.vmaf.vmaf`` / ``VmafStream`` on the fixture clips equal libvmaf 3.2.0's
per-frame columns exactly (refdata/vmaf-score: every pair; runs default, neg, 4k and modelopts)."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from fusedsim.families.vmaf.score_api import VmafStream, vmaf

from score_fixtures import load_score_pairs

MODELOPTS = ["version=vmaf_v0.6.1:name=vmaf", "version=vmaf_v0.6.1:name=vmaf_noclip:disable_clip",
             "version=vmaf_v0.6.1:name=vmaf_transform:enable_transform",
             "version=vmaf_v0.6.1:name=vmaf_transform_noclip:enable_transform:disable_clip"]


def test_every_pair_default_neg_4k_and_model_options(refdata):
    for pair in load_score_pairs(refdata):
        out = vmaf(pair.ref_y, pair.dist_y, pair.bit_depth, model=MODELOPTS)
        for name in ("vmaf", "vmaf_noclip", "vmaf_transform", "vmaf_transform_noclip"):
            assert out[name].tolist() == pair.metric("modelopts", name), f"{pair.name} {name}"
        for name in ("integer_adm2", "integer_aim", "integer_adm3", "integer_motion2", "integer_motion3",
                     "VMAF_integer_feature_motion_sad_score", *(f"integer_vif_scale{s}" for s in range(4)),
                     *(f"integer_adm_scale{s}" for s in range(4))):
            assert out[name].tolist() == pair.metric("default", name), f"{pair.name} {name}"
        assert vmaf(pair.ref_y, pair.dist_y, pair.bit_depth, model="vmaf_4k_v0.6.1")["vmaf"].tolist() == \
            pair.metric("4k", "vmaf"), pair.name
        neg = vmaf(pair.ref_y, pair.dist_y, pair.bit_depth, model="vmaf_v0.6.1neg")
        assert neg["vmaf"].tolist() == pair.metric("neg", "vmaf"), pair.name
        assert neg["integer_vif_scale0_egl_1"].tolist() == pair.metric("neg", "integer_vif_scale0_egl_1")


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_stream_in_batches_equals_whole_clip(refdata, batch):
    pair = next(p for p in load_score_pairs(refdata) if p.name == "r576x324_8b_mixed")  # 24 frames, real motion
    stream = VmafStream(pair.bit_depth)
    parts = [stream.push(pair.ref_y[i:i + batch], pair.dist_y[i:i + batch]) for i in range(0, pair.n, batch)]
    parts.append(stream.flush())
    assert all(len(p["vmaf"]) <= batch for p in parts[:-1])  # nothing held back longer than motion's one frame
    assert np.concatenate([p["vmaf"] for p in parts]).tolist() == pair.metric("default", "vmaf")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("batch", [1, 5])
def test_stream_on_the_gpu_returns_each_batch_one_push_later(refdata, batch):
    """On a GPU a push returns the previous batch's frames (read back while its own batch computes): the first push
    none, push k those of batch k-1 but motion's held frame, flush the rest; concatenated, libvmaf's values."""
    pair = next(p for p in load_score_pairs(refdata) if p.name == "r576x324_8b_mixed")  # 24 frames, real motion
    ref, dist = torch.as_tensor(pair.ref_y).cuda(), torch.as_tensor(pair.dist_y).cuda()
    stream = VmafStream(pair.bit_depth)
    parts = [stream.push(ref[i:i + batch], dist[i:i + batch]) for i in range(0, pair.n, batch)]
    parts.append(stream.flush())
    assert len(parts[0]["vmaf"]) == 0 and set(parts[0]) == set(parts[-1])  # every column, no values yet
    assert [len(p["vmaf"]) for p in parts[1:-1]] == [batch - 1] + [batch] * (len(parts) - 3)
    assert np.concatenate([p["vmaf"] for p in parts]).tolist() == pair.metric("default", "vmaf")
    assert np.concatenate([p["integer_motion2"] for p in parts]).tolist() == pair.metric("default", "integer_motion2")


def test_bad_inputs_named():
    frames = np.zeros((2, 64, 64), np.uint8)
    with pytest.raises(ValueError, match="same shape"):
        vmaf(frames, frames[:, :32])
    with pytest.raises(ValueError, match="integer luma"):
        vmaf(frames.astype(np.float32), frames.astype(np.float32))
    with pytest.raises(TypeError, match="model must be a model version"):
        vmaf(frames, frames, model=3)
    with pytest.raises(ValueError, match="unknown model version 'vmaf_v2'"):
        vmaf(frames, frames, model="vmaf_v2")
    stream = VmafStream()
    stream.push(frames, frames)
    with pytest.raises(ValueError, match="keep their size"):
        stream.push(frames[:, :32], frames[:, :32])
