"""Writes ``cvvdp_video_fixtures.json``: pycvvdp 0.5.7's JODs on the clips of :mod:`cvvdp_video_clips` (the tests
do not run it).

    FUSEDSIM_REFDATA=/path/to/refdata python tests/families/cvvdp/make_cvvdp_video_fixtures.py

Needs PyPI ``cvvdp==0.5.7`` (module ``pycvvdp``) and its imports; each value is
``pycvvdp.cvvdp(display_name=D, device=torch.device("cpu"), quiet=True).predict(dist, ref, dim_order="BFCHW",
frames_per_second=FPS)[0]`` on the clip as :func:`cvvdp_video_clips.make_clip` makes it (uint8 codes or float32).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from cvvdp_video_clips import FIXTURES, make_clip, sha256  # noqa: E402

CLIPS = [
    {"clip": "synthetic:noise", "frames": 10, "size": [48, 64]},
    {"clip": "synthetic:flicker", "frames": 10, "size": [48, 64]},
    {"clip": "synthetic:judder", "frames": 10, "size": [48, 64]},
    {"clip": "vmaf:r576x324_8b", "frames": 10, "crop": [100, 200, 96, 160]},
    {"clip": "vmaf:f480x270_10b", "frames": 10, "crop": [80, 160, 96, 160]},
]
DISPLAYS = ("standard_4k", "standard_fhd")
RATES = (30, 60)


def main() -> None:
    import pycvvdp

    refdata = Path(os.environ.get("FUSEDSIM_REFDATA", Path(__file__).resolve().parents[4] / "shared" / "refdata"))
    entries = []
    for spec in CLIPS:
        ref, dist = make_clip(spec, refdata)
        for display in DISPLAYS:
            metric = pycvvdp.cvvdp(display_name=display, device=torch.device("cpu"), quiet=True)
            for fps in RATES:
                jod, _ = metric.predict(dist, ref, dim_order="BFCHW", frames_per_second=fps)
                entries.append({**spec, "sha256": sha256(ref, dist), "display": display, "fps": fps,
                                "jod": float(jod)})
                print(spec["clip"], display, fps, float(jod))
    doc = {
        "source": f"pycvvdp {pycvvdp.__version__ if hasattr(pycvvdp, '__version__') else '0.5.7'} (PyPI cvvdp "
                  f"0.5.7), torch {torch.__version__}, CPU, float32",
        "command": "FUSEDSIM_REFDATA=/path/to/refdata python tests/families/cvvdp/make_cvvdp_video_fixtures.py",
        "call": "pycvvdp.cvvdp(display_name=display, device=torch.device('cpu'), quiet=True).predict(dist, ref, "
                "dim_order='BFCHW', frames_per_second=fps)[0]",
        "environment": "torchvision 0.28.0 (cvvdp imports its GaussianBlur, pure PyTorch) imported after defining "
                       "the torchvision::nms and qnms op schemas, which its C extension cannot register on CPU-only "
                       "torch; huggingface_hub (imported by the unused cvvdp_ml variant) stubbed",
        "clips": "cvvdp_video_clips.make_clip(entry): synthetic clips from integer arithmetic; vmaf:<pair> = the first "
                 "frames of refdata vmaf-score/clips/<pair>_ref and _mixed, cropped (top, left, h, w), BT.709 "
                 "limited-range YUV 4:2:0 -> RGB (nearest chroma), 8-bit as rounded uint8 codes, deeper as float32",
        "entries": entries,
    }
    FIXTURES.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
