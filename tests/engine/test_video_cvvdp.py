"""ColorVideoVDP in score_video / ``fusedsim video``: the temporal model on the decoded clip. Expected values come from
``fusedsim.cvvdp(..., fps=...)`` on the same decoded R'G'B' frames: the video API whose JODs equal pycvvdp 0.5.7's
(tests/families/cvvdp/test_cvvdp_video.py, fixture cvvdp_video_fixtures.json)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from video_clips import encode_rgb, photo_frames

import fusedsim
from fusedsim.cli import main as cli_main
from fusedsim.engine.video import score_video
from fusedsim.families.cvvdp.video_twin import cvvdp_video_pool_ref, cvvdp_video_running_jod_ref
from fusedsim.io.clip_pair import open_pair

RATE = 25
FRAMES = 6


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cvvdp_video")
    frames = photo_frames(FRAMES, width=64, height=48)
    ref = encode_rgb(folder / "ref.mkv", "ffv1", "yuv444p", frames, rate=RATE)
    dist = encode_rgb(folder / "dist.mkv", "mpeg4", "yuv420p", frames, rate=RATE, options={"qscale": "20"})
    return folder, ref, dist


def _rgb(ref, dist, **selection):
    with open_pair(ref, dist, device="cpu", **selection) as pair:
        batches = list(pair.batches(64))
    return (torch.cat([b.rgb("ref", "uint8") for b in batches]), torch.cat([b.rgb("dist", "uint8") for b in batches]))


def test_running_jod_is_the_pool_of_each_prefix():
    gen = torch.Generator().manual_seed(3)
    q = torch.rand(2, 7, 4, 6, generator=gen) * torch.tensor([1.0, 0.1, 0.01, 2.0]).view(1, 1, 4, 1)
    running = cvvdp_video_running_jod_ref(q)
    for t in range(q.shape[1]):
        # float32 sums over at most 7 frames in another order: a few ulps of the pooled difference
        torch.testing.assert_close(running[:, t], cvvdp_video_pool_ref(q[:, :t + 1]), rtol=2e-6, atol=2e-6)


def test_clip_jod_equals_the_video_api(clips):
    _, ref, dist = clips
    scores = score_video(ref, dist, ["cvvdp", "psnr"], device="cpu", batch_frames=4)
    r, d = _rgb(ref, dist)
    with torch.no_grad():
        want = float(fusedsim.cvvdp(r.unsqueeze(0), d.unsqueeze(0), fps=RATE)[0])
    # the same float32 pipeline on blocks of 4 and 2 frames instead of one block of 6
    assert scores.clip["cvvdp"] == pytest.approx(want, abs=1e-5)
    assert scores.columns["cvvdp"][-1] == scores.clip["cvvdp"]
    assert "cvvdp" not in scores.pooled and "psnr" in scores.pooled
    assert scores.info["cvvdp"] == {"model": "temporal", "fps": float(RATE), "display": "standard_4k"}
    for t in (0, 1, 3):  # the running JOD is the clip cut after frame t (frame 0: a still image, as pycvvdp)
        with torch.no_grad():
            cut = float(fusedsim.cvvdp(r[None, :t + 1], d[None, :t + 1], fps=RATE)[0])
        assert scores.columns["cvvdp"][t] == pytest.approx(cut, abs=1e-5)


def test_every_divides_the_frame_rate_and_display_is_a_param(clips):
    _, ref, dist = clips
    scores = score_video(ref, dist, ["cvvdp"], device="cpu", every=2, params={"cvvdp": {"display": "standard_fhd"}})
    r, d = _rgb(ref, dist, every=2)
    with torch.no_grad():
        want = float(fusedsim.cvvdp(r[None], d[None], fps=RATE / 2, display="standard_fhd")[0])
    assert scores.info["cvvdp"]["fps"] == RATE / 2 and scores.info["cvvdp"]["display"] == "standard_fhd"
    assert scores.clip["cvvdp"] == pytest.approx(want, abs=1e-5)


def test_frames_mode_scores_each_pair_as_an_image(clips):
    _, ref, dist = clips
    scores = score_video(ref, dist, ["cvvdp"], device="cpu", cvvdp="frames", frames=2)
    r, d = _rgb(ref, dist, frames=2)
    with torch.no_grad():
        want = fusedsim.cvvdp(r, d).double().numpy()
    np.testing.assert_allclose(scores.columns["cvvdp"], want, rtol=0, atol=1e-5)
    assert scores.clip == {} and "cvvdp" in scores.pooled


def test_raw_yuv_needs_a_frame_rate(tmp_path):
    y = np.full((16, 16), 100, np.uint8)
    u = np.full((8, 8), 128, np.uint8)
    planes = [[y, u, u]] * 3
    for name in ("a.yuv", "b.yuv"):
        (tmp_path / name).write_bytes(b"".join(p.tobytes() for frame in planes for p in frame))
    raw = {"width": 16, "height": 16, "pix_fmt": "yuv420p"}
    with pytest.raises(ValueError, match="frame rate is unknown.*--fps"):
        score_video(tmp_path / "a.yuv", tmp_path / "b.yuv", ["cvvdp"], device="cpu", **raw)
    scores = score_video(tmp_path / "a.yuv", tmp_path / "b.yuv", ["cvvdp"], device="cpu", fps=30.0, **raw)
    assert scores.clip["cvvdp"] == 10.0  # identical clips


def test_bad_mode_is_refused(clips):
    _, ref, dist = clips
    with pytest.raises(ValueError, match="cvvdp must be one of video, frames"):
        score_video(ref, dist, ["cvvdp"], device="cpu", cvvdp="clip")


def test_cli_writes_the_clip_jod(clips, capsys):
    folder, ref, dist = clips
    out = folder / "scores.json"
    assert cli_main.main(["video", str(ref), str(dist), "--metric", "cvvdp", "--device", "cpu", "-q",
                          "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    api = score_video(ref, dist, ["cvvdp"], device="cpu")
    assert payload["clip"] == {"cvvdp": api.clip["cvvdp"]}
    assert [f["metrics"]["cvvdp"] for f in payload["frames"]] == api.columns["cvvdp"].tolist()
    assert cli_main.main(["video", str(ref), str(dist), "--metric", "cvvdp", "--device", "cpu", "-q",
                          "--precision", "4"]) == 0
    text = capsys.readouterr().out
    assert f"clip {api.clip['cvvdp']:.4f} (temporal model, 25 frames/s, standard_4k)" in text


# Heat maps as pictures: the colour maps, their knots and the context's tone curve are pycvvdp 0.5.7's
# (pycvvdp/visualize_diff_map.py: visualize_diff_map, vis_tonemap).
_LUM = (0.212656, 0.715158, 0.072186)


def _unit_luminance(rgb):
    lum = sum(w * c for w, c in zip(_LUM, rgb))
    return torch.tensor(rgb) / (lum + 1e-4)


def test_heatmap_colours_are_pycvvdps():
    from fusedsim.families.cvvdp.visualize import heatmap_picture

    grey = torch.full((4, 3, 6, 8), 0.5)  # a flat frame: the tone curve puts it at 0.2 (the bottom of its 60%)
    levels = torch.tensor([0.0, 0.0125, 0.1, 0.7]).view(4, 1, 1, 1).expand(4, 1, 6, 8)
    got = heatmap_picture(levels, grey, "threshold")[:, :, 0, 0]
    blue, cyan, red = (_unit_luminance(c) for c in ((0.2, 0.2, 1.0), (0.2, 1.0, 1.0), (1.0, 0.2, 0.2)))
    for k, want in enumerate((blue, (blue + cyan) / 2, red, red)):  # 0.7 is beyond the last knot (0.1): red
        torch.testing.assert_close(got[k], (want * 0.2).clamp(0, 1), rtol=1e-5, atol=1e-6)
    supra = heatmap_picture(levels, grey, "supra-threshold")[:, :, 0, 0]
    torch.testing.assert_close(supra[3], (_unit_luminance((1.0, 1.0, 0.2)) * 0.2).clamp(0, 1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(heatmap_picture(levels, grey, "raw")[:, 0, 0, 0], torch.tensor([0.0, 0.0125, 0.1, 0.7]))
    with pytest.raises(ValueError, match="heatmap type must be one of"):
        heatmap_picture(levels, grey, "hot")


def test_tone_curve_keeps_the_middle_60_percent():
    from fusedsim.families.cvvdp.visualize import tonemapped_log_luminance

    ramp = torch.linspace(0.01, 1.0, 64).view(1, 1, 64).expand(3, 16, 64)  # log range > 0.6: histogram curve
    out = tonemapped_log_luminance(ramp)
    assert out.min() >= 0.2 - 1e-6 and out.max() <= 0.8 + 1e-6
    assert bool((out[0, 0, 1:] >= out[0, 0, :-1]).all())  # monotone in luminance


def test_cli_writes_the_heatmap_video(clips):
    import av

    folder, ref, dist = clips
    target = folder / "heat.mp4"
    assert cli_main.main(["video", str(ref), str(dist), "--metric", "cvvdp", "--device", "cpu", "-q",
                          "--cvvdp-heatmap", str(target), "--heatmap-type", "threshold"]) == 0
    with av.open(str(target)) as video:
        stream = video.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in video.decode(stream)]
        assert float(stream.average_rate) == RATE
    assert len(frames) == FRAMES and frames[0].shape == (48, 64, 3)
    assert not [p for p in folder.iterdir() if p.name.startswith(".heat")]  # the temporary file was renamed


def test_a_failed_run_leaves_no_heatmap(clips, monkeypatch):
    import fusedsim.engine.video as video

    folder, ref, dist = clips

    def fail(*args, **kwargs):
        raise RuntimeError("decoder died")

    monkeypatch.setattr(video, "_score_batches", fail)
    with pytest.raises(RuntimeError, match="decoder died"):
        score_video(ref, dist, ["cvvdp"], device="cpu", cvvdp_heatmap=folder / "broken.mp4")
    assert not [p for p in folder.iterdir() if "broken" in p.name]
    with pytest.raises(ValueError, match="add the cvvdp metric"):
        score_video(ref, dist, ["psnr"], device="cpu", cvvdp_heatmap=folder / "x.mp4")
    with pytest.raises(ValueError, match="must end in"):
        score_video(ref, dist, ["cvvdp"], device="cpu", cvvdp_heatmap=folder / "x.gif")


def test_a_heatmap_path_that_is_an_input_is_refused(clips):
    folder, ref, dist = clips
    link = folder / "dist_link.mkv"
    link.unlink(missing_ok=True)
    link.symlink_to(dist)
    before = dist.read_bytes()
    with pytest.raises(ValueError, match=r"is the distorted clip .* \(the same file\)"):
        score_video(ref, dist, ["cvvdp"], device="cpu", cvvdp_heatmap=link)
    assert dist.read_bytes() == before and not [p for p in folder.iterdir() if p.name.startswith(".dist_link")]
