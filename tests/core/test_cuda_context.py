"""The early CUDA context of GPU commands: started only where it can help, never an error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fusedsim.core import cuda_context


@pytest.mark.parametrize(("device", "index"), [("cpu", None), ("auto", 0), ("cuda", 0), ("cuda:3", 3)])
def test_device_index(device, index):
    assert cuda_context._device_index(device) == index


def test_not_started_for_the_cpu_or_once_torch_is_imported():
    import torch  # noqa: F401 - imported here on purpose: PyTorch makes its own context from now on

    assert cuda_context.start_context_in_background("cpu") is None
    assert cuda_context.start_context_in_background("cuda") is None


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # as in a command that has not imported it yet
    monkeypatch.setenv(cuda_context.ENV, "0")
    assert cuda_context.start_context_in_background("cuda") is None


def test_without_a_driver_the_thread_ends_quietly():
    """In a fresh interpreter without torch: the thread starts and ends without output, whatever the machine has
    (no driver library here: it returns at once; a GPU machine: it creates the context)."""
    code = ("import sys\n"
            "from fusedsim.core.cuda_context import start_context_in_background\n"
            "t = start_context_in_background('cuda')\n"
            "assert t is not None, 'not started'\n"
            "t.join(60)\n"
            "assert not t.is_alive()\n"
            "assert 'torch' not in sys.modules\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and proc.stderr == ""
