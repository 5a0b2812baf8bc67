"""Writes ``cvvdp_hdr_fixtures.json``: pycvvdp 0.5.7's JODs for HDR display models (PQ, HLG, linear) on the inputs of
:mod:`cvvdp_hdr_inputs` (the tests do not run it).

    python tests/families/cvvdp/make_cvvdp_hdr_fixtures.py

Needs PyPI ``cvvdp==0.5.7`` (module ``pycvvdp``). Each value is
``pycvvdp.cvvdp(display_name=D, display_photometry=P, device=torch.device("cpu"), quiet=True).predict(dist, ref,
dim_order=O, frames_per_second=FPS)[0]`` with ``O = "BCHW"``, ``FPS = 0`` for images and ``O = "BFCHW"`` for clips;
``P`` is ``None`` (the model's photometry) or, for entries with ``overrides``, ``vvdp_display_photo_eotf`` built
from the model's values with the overrides applied.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from cvvdp_hdr_inputs import FIXTURES, make_input, sha256  # noqa: E402

SIZE = [48, 64]
IMAGES = [
    ("standard_hdr_pq", "PQ", {}), ("65inch_hdr_pq_1Knit", "PQ", {}), ("standard_hdr_pq", "PQ", {"exposure": 2.0}),
    ("standard_hdr_hlg", "HLG", {}), ("iphone_14_pro_hdr", "HLG", {}),
    ("standard_hdr_hlg", "HLG", {"peak_luminance": 1000.0, "exposure": 1.5}),
    ("standard_hdr_linear", "linear", {}), ("standard_hdr_linear_dark", "linear", {}),
    ("standard_hdr_linear", "linear", {"exposure": 0.5}),
]
CLIPS = [("standard_hdr_pq", "PQ"), ("standard_hdr_hlg", "HLG"), ("standard_hdr_linear", "linear")]
FRAMES, FPS = 6, 30


def _import_pycvvdp():
    """pycvvdp imports torchvision (for GaussianBlur, pure PyTorch), whose C extension cannot register its ops on a
    CPU-only torch: define their schemas first. huggingface_hub (for the unused cvvdp_ml variants) is stubbed."""
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    hub = types.ModuleType("huggingface_hub")
    hub.hf_hub_download = None
    sys.modules.setdefault("huggingface_hub", hub)
    import pycvvdp

    return pycvvdp, lib


def _photometry(pycvvdp, display: str, overrides: dict):
    """pycvvdp's display photometry of ``display`` with ``overrides`` (our keyword names) applied, or None."""
    if not overrides:
        return None
    from pycvvdp.display_model import vvdp_display_photo_eotf, vvdp_display_photometry

    base = vvdp_display_photometry.load(display, [])
    return vvdp_display_photo_eotf(overrides.get("peak_luminance", base.Y_peak), contrast=base.contrast,
                                   source_colorspace=json.loads(Path(pycvvdp.__file__).with_name("vvdp_data").joinpath(
                                       "display_models.json").read_text())[display]["colorspace"],
                                   E_ambient=base.E_ambient, k_refl=base.k_refl,
                                   exposure=overrides.get("exposure", base.exposure))


def main() -> None:
    pycvvdp, _lib = _import_pycvvdp()
    entries = []
    specs = [{"display": d, "eotf": e, "overrides": o, "distortion": dist, "frames": 1, "size": SIZE}
             for d, e, o in IMAGES for dist in ("noise", "dim")]
    specs += [{"display": d, "eotf": e, "overrides": {}, "distortion": dist, "frames": FRAMES, "size": SIZE,
               "fps": FPS} for d, e in CLIPS for dist in ("noise", "flicker")]
    for spec in specs:
        ref, dist = make_input(spec)
        metric = pycvvdp.cvvdp(display_name=spec["display"], display_photometry=_photometry(pycvvdp, spec["display"],
                               spec["overrides"]), device=torch.device("cpu"), quiet=True)
        if spec.get("fps"):
            jod, _ = metric.predict(dist, ref, dim_order="BFCHW", frames_per_second=spec["fps"])
        else:
            jod, _ = metric.predict(dist, ref, dim_order="BCHW", frames_per_second=0)
        entries.append({**spec, "sha256": sha256(ref, dist), "jod": float(jod)})
        print(spec["display"], spec["overrides"], spec["distortion"], spec.get("fps"), float(jod))
    doc = {
        "source": f"pycvvdp 0.5.7 (PyPI cvvdp 0.5.7), torch {torch.__version__}, CPU, float32",
        "command": "python tests/families/cvvdp/make_cvvdp_hdr_fixtures.py",
        "call": "pycvvdp.cvvdp(display_name=display, display_photometry=None or vvdp_display_photo_eotf(model values "
                "with overrides), device=torch.device('cpu'), quiet=True).predict(dist, ref, dim_order='BCHW', "
                "frames_per_second=0) for images, predict(dist, ref, dim_order='BFCHW', frames_per_second=fps) for "
                "clips; [0]",
        "environment": "torchvision imported after defining the torchvision::nms and qnms op schemas, which its C "
                       "extension cannot register on CPU-only torch; huggingface_hub (imported by the unused cvvdp_ml "
                       "variant) stubbed",
        "inputs": "cvvdp_hdr_inputs.make_input(entry): float32 (1, 3, H, W) images or (1, T, 3, H, W) clips of a "
                  "synthetic scene in cd/m², encoded with the entry's EOTF (PQ code values, HLG code values of the "
                  "scene relative to 4000 cd/m², or linear cd/m²)",
        "entries": entries,
    }
    FIXTURES.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
