"""The MetricSpec registry: look-up by name and alias, clear errors, registration rules, torch-free import."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from fusedsim.metrics import registry
from fusedsim.metrics.registry import MetricFunctions, MetricSpec, get_metric, list_metrics, register_metric


def spec(name: str, **kw) -> MetricSpec:
    fields = dict(kind="image", functions=lambda: MetricFunctions(compute=math.sqrt), summary="test metric",
                  outputs=(name,))
    fields.update(kw)
    return MetricSpec(name=name, **fields)


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made by a test disappear after it."""
    list_metrics()  # the built-ins are in before the copies are taken
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))


def test_builtin_names_and_kinds():
    assert [s.name for s in list_metrics("image")] == ["ssim", "ms-ssim", "psnr"]
    assert [s.name for s in list_metrics("video")] == ["vmaf:ssim", "vmaf:float_ssim", "vmaf:float_ms_ssim",
                                                       "vmaf:psnr", "vmaf:vif", "vmaf:adm", "vmaf:motion",
                                                       "vmaf:psnr_hvs", "vmaf:ciede", "vmaf:speed_chroma",
                                                       "vmaf:float_vif", "vmaf:float_adm", "vmaf:float_motion",
                                                       "vmaf:cambi"]
    perceptual = [s.name for s in list_metrics("srgb")]
    # no list of perceptual metrics here: each is declared by its family folder (tests/metrics/test_srgb_specs.py
    # runs every one of them)
    assert perceptual and all(s.functions.__module__.startswith("fusedsim.families.") for s in list_metrics("srgb"))
    assert sorted(list_metrics(), key=lambda s: s.name) == sorted(
        list_metrics("image") + list_metrics("video") + list_metrics("srgb"), key=lambda s: s.name)


def test_lookup_by_name_alias_and_case():
    assert get_metric("ms-ssim") is get_metric("MS_SSIM") is get_metric(" msssim ")
    assert get_metric("vmaf:psnr").short_name == "psnr"
    assert get_metric("psnr").kind == "image" and get_metric("vmaf:psnr").kind == "video"


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown metric 'lpips'; known metrics: ssim, ms-ssim, psnr, butteraugli, "):
        get_metric("lpips")
    with pytest.raises(TypeError, match="metric name must be a str"):
        get_metric(3)
    with pytest.raises(ValueError, match="kind must be one of image, video"):
        list_metrics("audio")


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_metric("ssim").min_size = 1


def test_register_rejects_taken_names_and_aliases(scratch_registry):
    with pytest.raises(ValueError, match="'ssim' is already registered"):
        register_metric(spec("ssim"))
    with pytest.raises(ValueError, match=r"'msssim' is already registered \(by 'ms-ssim'\)"):
        register_metric(spec("new", aliases=("msssim",)))
    added = register_metric(spec("root", aliases=("sqrt",)))
    assert get_metric("sqrt") is added and added.load() is math.sqrt
    with pytest.raises(TypeError, match="must be a MetricSpec"):
        register_metric({"name": "x"})


@pytest.mark.parametrize("bad, match", [
    (dict(kind="audio"), "kind must be one of"),
    (dict(functions="math:sqrt"), "functions must be a loader"),  # code, not a string
    (dict(outputs=()), "outputs must name"),
    (dict(value_range=(1.0, 0.0)), "value_range"),
    (dict(min_size=0), "min_size must be an int >= 1"),
])
def test_spec_validation(bad, match):
    with pytest.raises(ValueError, match=match):
        spec("x", **bad)
    with pytest.raises(ValueError, match="lower-case"):
        spec("Upper")


def test_every_metric_loads_a_callable():
    for s in list_metrics():
        assert callable(s.load()), s.name


def test_working_set_grows_with_the_pixels():
    s = get_metric("ssim")
    assert s.working_set_bytes(100, 200, 3) == pytest.approx(s.bytes_per_pixel * 60_000 + s.fixed_bytes, abs=1)
    assert s.working_set_bytes(200, 200, 3) > s.working_set_bytes(100, 200, 3) > 0


def test_registry_imports_neither_torch_nor_a_metric():
    code = ("import sys\nfrom fusedsim.metrics.registry import list_metrics\nlist_metrics()\n"
            "sys.exit(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('fusedsim.ssim', "
            "'fusedsim.vmaf', 'fusedsim.metrics._'))) or 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
