"""How maps and curves are drawn, tested on the arrays and settings handed to matplotlib (not on figure pixels):
bright is worse for every metric, SSIM's range is fixed at 0..1 (float32 values above 1 clipped), Butteraugli's
runs to its max-norm, ColorVideoVDP's heavy tail is cut at the 99.5th percentile, and PSNR's axis is in dB."""

from __future__ import annotations

import numpy as np
import pytest

from fusedsim.cli.diffmap import map_source, map_view
from fusedsim.metrics.registry import get_metric

matplotlib = pytest.importorskip("matplotlib")


def _luminance(cmap: str, value: float, view) -> float:
    r, g, b, _ = matplotlib.colormaps[cmap]((value - view.vmin) / (view.vmax - view.vmin))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b  # Rec. 709 relative luminance


# the maps' own sense: SSIM's local values rise with similarity; Butteraugli's distances and ColorVideoVDP's
# differences (1 - JOD/10 per pixel) rise with the difference, although cvvdp's score (JOD) rises with quality
MAP_HIGHER_IS_BETTER = {"ssim": True, "butteraugli": False, "cvvdp": False}


@pytest.mark.parametrize("metric", list(MAP_HIGHER_IS_BETTER))
def test_bright_is_worse(metric):
    values = np.linspace(0.0, 1.0, 100).reshape(10, 10)
    view = map_view(map_source(get_metric(metric)), values)
    best, worst = (view.vmax, view.vmin) if MAP_HIGHER_IS_BETTER[metric] else (view.vmin, view.vmax)
    assert _luminance(view.cmap, worst, view) > _luminance(view.cmap, best, view)
    assert "bright = worse" in view.label


def test_ssim_range_is_fixed_and_clipped():
    values = np.full((12, 12), np.nan)
    values[5:-5, 5:-5] = [[0.5, np.float32(1.0000001)], [-0.2, 0.9]]
    view = map_view(map_source(get_metric("ssim")), values)
    assert (view.vmin, view.vmax) == (0.0, 1.0)
    assert view.values[5, 6] == 1.0 and view.values[6, 5] == 0.0 and view.values[5, 5] == 0.5
    assert np.isnan(view.values[:5]).all()  # the border without a window stays blank
    assert view.extend == "both"
    constant = map_view(map_source(get_metric("ssim")), np.full((4, 4), 0.3))
    assert (constant.vmin, constant.vmax) == (0.0, 1.0)  # the same scale for every pair


def test_butteraugli_runs_to_its_max():
    values = np.random.default_rng(0).gamma(2.0, 0.5, (40, 40))
    view = map_view(map_source(get_metric("butteraugli")), values)
    assert (view.vmin, view.vmax) == (0.0, values.max()) and view.extend == "neither"
    assert np.array_equal(view.values, values)


def test_cvvdp_heavy_tail_is_cut_at_the_995th_percentile():
    rng = np.random.default_rng(1)
    values = rng.random((100, 100)) * 0.02
    values.flat[:10] = 5.0  # a few extreme pixels that would leave the rest of the map black
    view = map_view(map_source(get_metric("cvvdp")), values)
    top = np.sort(values.ravel())[int(0.995 * (values.size - 1))]  # close to numpy's linear 99.5th percentile
    assert view.vmin == 0.0 and view.vmax == pytest.approx(top, rel=0.05) and view.vmax < 0.03
    assert view.values.max() == view.vmax and view.extend == "max"


def test_psnr_axis_is_in_db():
    from fusedsim.cli.sweep import curves_figure

    rows = [{"ref": "a.png", "codec": "jpeg", "bpp": b, "psnr": p, "ssim": s}
            for b, p, s in ((0.5, 30.0, 0.8), (1.0, 35.0, 0.9))]
    fig = curves_figure(rows, ["psnr", "ssim"])
    try:
        assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["psnr (dB)", "ssim"]
    finally:
        matplotlib.pyplot.close(fig)
