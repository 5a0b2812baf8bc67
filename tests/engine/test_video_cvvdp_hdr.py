"""HDR display models in score_video / ``fusedsim video``: a 10-bit clip decodes to float R'G'B' in [0, 1], which a PQ
or HLG display takes as its code values (as pycvvdp takes a PQ clip's decoded R'G'B'); the expected values are
``fusedsim.cvvdp(..., display=...)`` on the same frames (tests/families/cvvdp/test_cvvdp_hdr.py ties those to pycvvdp
0.5.7). 8-bit codes and linear displays, which decoded files cannot feed correctly, are refused with the remedy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from video_clips import write_y4m

import fusedsim
from fusedsim.cli.metric_params import chosen_params
from fusedsim.engine.video import score_video
from fusedsim.io.clip_pair import open_pair

RATE = 25
FRAMES, HEIGHT, WIDTH = 4, 32, 48


def _planes(seed: int) -> list[list[np.ndarray]]:
    """10-bit 4:2:0 frames: a moving ramp in luma with mild per-seed noise, neutral-ish chroma."""
    gen = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    frames = []
    for t in range(FRAMES):
        luma = 64 + (x * 14 + y * 5 + t * 20) % 876 + (gen.integers(-12, 13, (HEIGHT, WIDTH)) if seed else 0)
        u = 512 + 40 * np.sin(0.3 * np.mgrid[0:HEIGHT // 2, 0:WIDTH // 2][1] + t)
        v = np.full((HEIGHT // 2, WIDTH // 2), 480)
        frames.append([np.clip(luma, 64, 940).astype(np.uint16), u.astype(np.uint16), v.astype(np.uint16)])
    return frames


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cvvdp_hdr_video")
    ref = write_y4m(folder / "ref.y4m", _planes(0), 10)
    dist = write_y4m(folder / "dist.y4m", _planes(1), 10)
    return ref, dist


def test_ten_bit_clip_scores_as_pq_code_values(clips):
    ref, dist = clips
    scores = score_video(ref, dist, ["cvvdp"], device="cpu", params={"cvvdp": {"display": "standard_hdr_pq"}})
    with open_pair(ref, dist, device="cpu") as pair:
        batches = list(pair.batches(64))
    r = torch.cat([b.rgb("ref", "float") for b in batches])
    d = torch.cat([b.rgb("dist", "float") for b in batches])
    assert r.dtype == torch.float32 and 0 <= float(r.min()) and float(r.max()) <= 1
    with torch.no_grad():
        want = float(fusedsim.cvvdp(r[None], d[None], fps=RATE, display="standard_hdr_pq")[0])
    assert scores.clip["cvvdp"] == pytest.approx(want, abs=1e-5)
    assert scores.info["cvvdp"]["display"] == "standard_hdr_pq"


def test_eight_bit_codes_and_linear_displays_are_refused(clips):
    ref, dist = clips
    with pytest.raises(ValueError, match="takes PQ code values as floats.*--rgb float"):
        score_video(ref, dist, ["cvvdp"], device="cpu", rgb="uint8", params={"cvvdp": {"display": "standard_hdr_pq"}})
    with pytest.raises(ValueError, match="absolute linear light in cd/m²"):
        score_video(ref, dist, ["cvvdp"], device="cpu", params={"cvvdp": {"display": "standard_hdr_linear"}})
    with pytest.raises(ValueError, match="--param cvvdp.display=standard_hdr_linear: .*absolute linear light"):
        chosen_params([("cvvdp", "display", "standard_hdr_linear")], ["cvvdp"])
    assert chosen_params([("cvvdp", "display", "standard_hdr_hlg")], ["cvvdp"]) == {
        "cvvdp": {"display": "standard_hdr_hlg"}}
