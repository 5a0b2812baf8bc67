"""cvvdp's display geometry is never ignored silently (issue 38): ``ppd`` sets the pixels per degree directly, so
geometry given with it (resolution, viewing distance, diagonal) would be dropped; that is refused, naming it. Each
geometry argument alone is applied."""

from __future__ import annotations

import pytest
import torch

from fusedsim.families.cvvdp.api import cvvdp, prepare_cvvdp

_GEN = torch.Generator().manual_seed(0)
_REF = torch.rand(1, 3, 32, 32, generator=_GEN)
_DIST = (_REF + 0.1 * torch.rand(1, 3, 32, 32, generator=_GEN)).clamp(0, 1)
GEOMETRY = {"resolution": (640, 480), "viewing_distance_m": 3.0, "diagonal_inches": 100.0}


@pytest.mark.parametrize("name", sorted(GEOMETRY))
def test_ppd_with_geometry_is_refused_naming_it(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        cvvdp(_REF, _DIST, ppd=30.0, **{name: GEOMETRY[name]})
    with pytest.raises(ValueError, match=name):
        prepare_cvvdp(_REF, ppd=30.0, **{name: GEOMETRY[name]})


def test_each_geometry_argument_is_applied() -> None:
    base = float(cvvdp(_REF, _DIST))
    assert float(cvvdp(_REF, _DIST, ppd=10.0)) != base
    for name, value in GEOMETRY.items():
        assert float(cvvdp(_REF, _DIST, **{name: value})) != base, name
