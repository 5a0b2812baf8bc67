"""``fusedsim score REF DIST``: compare two image files with the image metrics of the registry.

Building the parser imports neither torch nor a metric (the choices come from :mod:`fusedsim.metrics.registry`);
``run`` imports them.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from fusedsim._device import DEVICE_HELP, check_device_name
from fusedsim.metrics.registry import MetricSpec, get_metric, list_metrics

DEFAULT_METRICS = ("ssim",)

DESCRIPTION = """\
Compare a distorted image file with its reference (8- or 16-bit, grey or RGB).
The data range is the files' (255 or 65535); both files must have the same
size, channels and bit depth. Opaque alpha is dropped, transparency refused,
palette images are read as RGB. The perceptual metrics read the files as sRGB
(grey images as R = G = B).

metrics:
{metrics}

--format json writes valid JSON; non-finite values (PSNR of identical images
is +inf) are written as null."""


def example_pair() -> tuple[Path, Path]:
    """The bundled photo pair (a crop of scikit-image's chelsea.png, CC0, and its JPEG q=10 version)."""
    root = resources.files("fusedsim") / "data"
    return Path(str(root / "example_ref.png")), Path(str(root / "example_dist.png"))


def _image_metric(text: str) -> str:
    """argparse type of ``--metric``: an image metric's name or alias, returned as its registry name."""
    try:
        spec = get_metric(text)
    except ValueError:
        spec = None
    if spec is None or spec.kind not in _KINDS:
        names = ", ".join(s.name for s in _score_metrics())
        raise argparse.ArgumentTypeError(f"unknown image metric {text!r}; choose from {names}")
    return spec.name


_KINDS = ("image", "srgb")  # pixel metrics, and the perceptual metrics on sRGB images


def _score_metrics() -> list[MetricSpec]:
    return [s for kind in _KINDS for s in list_metrics(kind)]


def _device(text: str) -> str:
    try:
        return check_device_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    specs = _score_metrics()
    width = max(len(s.name) for s in specs)
    table = "\n".join(f"  {s.name:<{width}}  {s.summary}" for s in specs)
    parser = sub.add_parser("score", help="score a distorted image against a reference image",
                            description=DESCRIPTION.format(metrics=table),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", metavar="REF", nargs="?", help="reference image file")
    parser.add_argument("dist", metavar="DIST", nargs="?", help="distorted image file")
    parser.add_argument("--example", action="store_true", help="score the bundled example photo pair")
    parser.add_argument("--metric", action="append", type=_image_metric, metavar="NAME",
                        help=f"metric to compute, repeatable: {', '.join(s.name for s in specs)} "
                             f"(default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.add_argument("--device", type=_device, default="auto",
                        help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.set_defaults(run=run)


def check_min_size(specs: list[MetricSpec], width: int, height: int) -> None:
    """Raise ``ValueError`` naming REF/DIST and their size if an image is too small for a metric."""
    for spec in specs:
        if min(width, height) < spec.min_size:
            raise ValueError(f"REF and DIST are {width}×{height} but {spec.name} needs at least {spec.min_size} px "
                             f"per side ({spec.min_size_reason})")


def run(args: argparse.Namespace) -> int:
    from fusedsim._device import resolve_device
    from fusedsim.cli._json import dumps
    from fusedsim.io.images import check_image_pair, read_image

    if args.example:
        if args.ref or args.dist:
            raise ValueError("give either --example or REF and DIST, not both")
        ref_path, dist_path = example_pair()
    elif args.ref and args.dist:
        ref_path, dist_path = Path(args.ref), Path(args.dist)
    else:
        raise ValueError("REF and DIST image files are required (or --example)")
    specs = [get_metric(name) for name in dict.fromkeys(args.metric or DEFAULT_METRICS)]
    ref = read_image(ref_path, "REF")
    dist = read_image(dist_path, "DIST")
    check_image_pair(ref, dist)
    check_min_size(specs, ref.width, ref.height)
    device = resolve_device(args.device)
    x, y = ref.pixels.to(device), dist.pixels.to(device)
    results: dict[str, float | dict[str, float]] = {}
    for spec in specs:
        if spec.kind == "image":
            results[spec.name] = float(spec.load()(x, y, data_range=ref.data_range))
        else:
            results[spec.name] = _perceptual(spec, *(srgb(t, ref.data_range, role) for t, role in
                                                    ((x, "REF"), (y, "DIST"))))
    if args.format == "json":
        print(dumps({"reference": str(ref_path), "distorted": str(dist_path), "data_range": ref.data_range,
                     "metrics": results}))
    else:
        for name, value in results.items():
            if isinstance(value, dict):
                for field, v in value.items():
                    print(f"{name} {field}: {v:.6f}")
            else:
                print(f"{name}: {value:.6f}")
    return 0


def srgb(pixels, data_range: int, role: str):
    """Pixels ``(1, C, H, W)`` in 0..data_range as sRGB in [0, 1] with 3 channels (grey is replicated: the
    perceptual metrics are defined on colour images, and a grey image is the colour image with R = G = B)."""
    if pixels.shape[1] == 1:
        pixels = pixels.expand(-1, 3, -1, -1)
    if pixels.shape[1] != 3:
        raise ValueError(f"{role} has {pixels.shape[1]} channels; the perceptual metrics need grey or RGB")
    return pixels / data_range


def _perceptual(spec: MetricSpec, ref, dist) -> float | dict[str, float]:
    """A perceptual metric's scalar outputs for one pair: a number, or {field: number} for several."""
    out = spec.load()(ref, dist)
    if len(spec.outputs) == 1 and not hasattr(out, "_fields"):
        return float(out.reshape(-1)[0])
    return {field: float(getattr(out, field).reshape(-1)[0]) for field in spec.outputs}
