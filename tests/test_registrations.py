"""Every registration resolves without running anything: each op's Triton plan and CPU kernel (imported through
its family's loaders), each metric's functions, each family's public names. A rename or a missing decorator fails
here, in CI, rather than on a user's first GPU call."""

from __future__ import annotations

import importlib.util

import pytest

from fusedsim.core.registry import registered_ops
from fusedsim.families import exports, family_names, load_families
from fusedsim.metrics.registry import MetricFunctions, list_metrics

OPS = registered_ops()


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton not installed")
@pytest.mark.parametrize("op", [op for op in OPS if op.load_triton is not None], ids=lambda op: op.name)
def test_every_triton_plan_is_registered(op):
    op.prepare()  # imports the family's kernel modules; launches nothing
    assert callable(op._plan_factory), op.name


@pytest.mark.parametrize("op", [op for op in OPS if op.has_cpu_kernel], ids=lambda op: op.name)
def test_every_cpu_kernel_is_registered(op):
    pytest.importorskip("numba")
    assert callable(op.cpu_impl()), op.name


@pytest.mark.parametrize("spec", list_metrics(), ids=lambda s: s.name)
def test_every_metric_resolves_its_functions(spec):
    functions = spec.implementation()
    assert isinstance(functions, MetricFunctions) and callable(functions.compute)
    if spec.cached_reference:
        assert callable(functions.prepare) and callable(functions.score_prepared)
    for kernel_op in functions.ops:
        assert kernel_op in OPS


def test_every_family_declares_what_it_exports_and_each_name_resolves():
    families = load_families()
    assert [f.__name__.rsplit(".", 1)[1] for f in families] == list(family_names())
    for family in families:
        assert isinstance(getattr(family, "EXPORTS", None), (tuple, dict)), family.__name__
        for name in (*family.EXPORTS, *getattr(family, "PUBLIC", ())):
            assert getattr(family, name) is not None, (family.__name__, name)
    import fusedsim

    for name, family in exports().items():
        assert getattr(fusedsim, name) is getattr(family, name), name


def test_no_module_imports_another_modules_private_names():
    """Modules share only public names: no ``from fusedsim.x import _y`` across modules."""
    import ast
    from pathlib import Path

    import fusedsim

    offenders = []
    for path in Path(fusedsim.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fusedsim"):
                offenders += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []
