"""score_video: per-frame scores equal the image path (the Scorer on the same frames saved as PNG and read back),
alignment reaches the right frames, VMAF equals fusedsim.vmaf on the decoded luma, pooling."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from video_clips import encode_planes, encode_rgb, encoder_available, photo_frames, photo_planes

from fusedsim.engine.scorer import Scorer
from fusedsim.engine.video import pool_column, score_video
from fusedsim.io.compressed import open_compressed
from fusedsim.io.images import read_image
from fusedsim.io.yuv_rgb import rgb_uint8

METRICS = ["psnr", "ssim", "ssimulacra2"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("video")
    ref = encode_planes(folder / "ref.mkv", "ffv1", "yuv420p", photo_planes(5, "yuv420p"))
    codec = "libx264" if encoder_available("libx264") else "mpeg4"
    dist = encode_rgb(folder / "dist.mp4", codec, "yuv420p", photo_frames(5),
                      options={"crf": "35"} if codec == "libx264" else {"qscale": "12"})
    return folder, ref, dist


def _png_frames(path, folder, tag):
    reader = open_compressed(path)
    out = []
    for frame in reader.frames():
        planes = [torch.from_numpy(p)[None] for p in (frame.y, frame.u, frame.v)]
        rgb = rgb_uint8(*planes, 8, reader.info.colour)[0].permute(1, 2, 0).numpy()
        png = folder / f"{tag}{frame.index}.png"
        Image.fromarray(rgb).save(png)
        out.append(png)
    return out


def test_per_frame_scores_equal_the_image_path(clips):
    folder, ref, dist = clips
    with torch.inference_mode():
        scores = score_video(ref, dist, METRICS, device="cpu", batch_frames=2, encoded_offset=1)
    assert scores.ref_index == [0, 1, 2, 3] and scores.dist_index == [1, 2, 3, 4]
    refs, dists = _png_frames(ref, folder, "r"), _png_frames(dist, folder, "d")
    scorer = Scorer(METRICS, device="cpu")
    for k, (r, d) in enumerate(zip(scores.ref_index, scores.dist_index)):
        values = scorer.score(read_image(refs[r]), read_image(dists[d])).values
        for name in METRICS:
            assert scores.columns[name][k] == values[name], (name, k)
    assert scores.notes == ["the last 1 frame(s) of the reference clip have no partner and are not compared"]
    assert scores.info["rgb"] == "uint8" and scores.info["dist"]["decoder"] == "cpu"


def test_vmaf_equals_vmaf_on_the_decoded_luma(clips):
    from fusedsim.families.vmaf import vmaf

    _, ref, dist = clips
    scores = score_video(ref, dist, ["vmaf"], device="cpu", batch_frames=2)
    luma = [np.stack([f.y for f in open_compressed(p).frames(("y",))]) for p in (ref, dist)]
    expected = vmaf(luma[0], luma[1], bit_depth=8)["vmaf"]
    np.testing.assert_array_equal(scores.columns["vmaf"], expected)


def test_pooling():
    values = np.array([10.0, 20.0, 30.0, 40.0])
    up = pool_column(values, higher_is_better=True)
    assert up["mean"] == 25.0 and up["min"] == 10.0 and up["max"] == 40.0
    assert up["harmonic_mean"] == pytest.approx(4 / sum(1 / (v + 1) for v in values) - 1, rel=1e-15)
    assert up["p10"] == pytest.approx(13.0)  # numpy's linear interpolation: rank 0.3 between 10 and 20
    down = pool_column(values, higher_is_better=False)
    assert down["p10"] == pytest.approx(37.0)  # lower is better: the worst 10% are the largest values


def test_metric_names_are_checked(clips):
    _, ref, dist = clips
    with pytest.raises(ValueError, match="vmaf:ssim is a video metric"):
        score_video(ref, dist, ["vmaf:ssim"], device="cpu")
    with pytest.raises(ValueError, match="vmaf: VMAF's motion .* needs consecutive frames"):
        score_video(ref, dist, ["vmaf"], device="cpu", every=2)
    with pytest.raises(ValueError, match="rgb must be one of"):
        score_video(ref, dist, ["psnr"], device="cpu", rgb="yuv")
