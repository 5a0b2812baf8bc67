"""Start-up: ``import fusedsim`` is light, the public API resolves lazily, and the CLI parses without torch.

Every check runs in a fresh interpreter: this test process has long imported torch (conftest).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch._dynamo", "triton")


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args, "-c", code], capture_output=True, text=True, timeout=120)


def loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` are in sys.modules after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(modules)!r} if m in sys.modules]))"
    proc = run_python(probe)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plain_import_loads_neither_dynamo_nor_triton_nor_torch():
    assert loaded_after("import fusedsim", (*HEAVY, "torch")) == []


def test_resolving_the_public_api_loads_neither_dynamo_nor_triton():
    # SSIM, VMAF and metric attributes import torch but must leave its compiler stack and Triton for first use
    code = ("import fusedsim\nfusedsim.ssim, fusedsim.fused_ssim, fusedsim.SSIM, fusedsim.use_backend\n"
            "fusedsim.metrics.psnr, fusedsim.vmaf.integer_ssim, fusedsim.io.images.read_image")
    assert loaded_after(code, HEAVY) == []


def test_submodules_and_metrics_resolve_after_a_plain_import():
    code = """
import fusedsim
assert callable(fusedsim.metrics.psnr) and fusedsim.metrics.psnr.__name__ == "psnr"
assert callable(fusedsim.vmaf.integer_ssim) and callable(fusedsim.vmaf.psnr)
assert callable(fusedsim.io.images.read_image) and callable(fusedsim.io.video.open_video)
assert fusedsim.get_metric("psnr").load() is fusedsim.metrics.psnr
assert [s.name for s in fusedsim.list_metrics("image")] == ["ssim", "ms-ssim", "psnr"]
assert isinstance(fusedsim.__version__, str) and "metrics" in dir(fusedsim) and "ssim" in dir(fusedsim)
print("ok")
"""
    proc = run_python(code)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_importing_a_subpackage_does_not_shadow_the_function_of_the_same_name():
    # ``from fusedsim.ssim import ...`` binds the sub-package fusedsim.ssim; fusedsim.ssim must stay the function
    code = """
import torch, fusedsim
from fusedsim.ssim import ssim as direct
import fusedsim.families.psnr.api
assert fusedsim.ssim is direct, fusedsim.ssim
assert callable(fusedsim.metrics.psnr)
print(float(fusedsim.ssim(torch.rand(1, 1, 16, 16), torch.rand(1, 1, 16, 16), data_range=1.0)))
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert -1.0 <= float(proc.stdout) < 0.5  # independent noise images


@pytest.mark.parametrize("name", ["fused_ssim", "ssim", "ms_ssim", "SSIM", "MS_SSIM", "FusedSSIM", "l1_ssim_loss",
                                  "L1SSIMLoss"])
def test_ssim_names_are_those_of_the_ssim_package(name):
    import importlib

    import fusedsim

    assert getattr(fusedsim, name) is getattr(importlib.import_module("fusedsim.ssim"), name)


def test_backend_names_and_unknown_attribute():
    import fusedsim
    from fusedsim import backend

    assert fusedsim.use_backend is backend.use_backend
    assert fusedsim.BackendUnavailableError is backend.BackendUnavailableError
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fusedsim.nope  # noqa: B018


# ---------------------------------------------------------------------------------------------------------- CLI
CLI_RUNNER = """
import json, sys
from fusedsim.cli.main import main
try:
    code = main({argv!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "torch": "torch" in sys.modules}}), file=sys.__stderr__)
"""


@pytest.mark.parametrize("argv, code", [
    (["--help"], 0),
    (["--version"], 0),
    (["score", "--help"], 0),
    (["vmaf", "--help"], 0),
    (["list-metrics", "--help"], 0),
    (["list-metrics"], 0),
    (["list-metrics", "--kind", "video", "--format", "json"], 0),
    (["bogus"], 2),  # unknown command
    ([], 2),  # missing command
    (["vmaf", "ref.y4m"], 2),  # missing argument
    (["score", "--metric", "vmaf:ssim", "a.png", "b.png"], 2),  # bad choice
    (["score", "--device", "gpu", "a.png", "b.png"], 2),
    (["score", "--param", "butteraugli.nope=1", "a.png", "b.png"], 2),  # unknown metric parameter
    (["list-metrics", "--kind", "perceptual"], 0),
    (["vmaf", "a.y4m", "b.y4m", "--device", "tpu"], 2),
    (["vmaf", "-v"], 0),
    (["vmaf", "-r", "a.yuv", "-d", "b.yuv", "-w", "8", "-h", "8", "-p", "420"], 2),  # -p without -b
    (["vmaf", "a.yuv", "b.yuv", "--json"], 2),  # --json without -o
    (["vmaf", "a.yuv", "b.yuv", "--feature", "psnr=enable_chroma=true"], 2),  # feature options
    (["list-metrics", "--format", "xml"], 2),
])
def test_cli_parsing_never_imports_torch(argv, code):
    proc = run_python(CLI_RUNNER.format(argv=argv))
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    assert result == {"code": code, "torch": False}, proc.stderr


def test_module_help_imports_no_torch():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "fusedsim", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "score" in proc.stdout and "list-metrics" in proc.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "fusedsim.cli.main" in imported  # the import-time report is there
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]
