"""Create a GPU's CUDA context while the process is still importing PyTorch.

A GPU command's start-up is ``import torch`` (seconds) followed by the CUDA context's creation (the driver's
``cuInit`` and the device's primary context, up to a second on some machines), one after the other. Through the
driver API (``libcuda``, loaded with ctypes: no PyTorch needed) the primary context can be created on a daemon
thread before torch is imported; PyTorch's runtime then finds it made and uses it (it uses each device's primary
context), so the two waits overlap. ctypes releases the GIL during the driver calls, so the import proceeds.

Torch-free and silent: without the driver (a CPU machine, ROCm) or on any driver error the thread simply ends,
and PyTorch later reports what it finds itself. ``FUSEDSIM_EARLY_CUDA_CONTEXT=0`` turns it off.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading

__all__ = ["ENV", "start_context_in_background"]

ENV = "FUSEDSIM_EARLY_CUDA_CONTEXT"


def _device_index(device: str) -> int | None:
    """The device index a ``--device`` name will use (``auto`` and ``cuda``: the first visible GPU); None for the
    CPU."""
    if device == "cpu":
        return None
    _, _, index = device.partition(":")
    return int(index) if index else 0


def _create_primary_context(index: int) -> None:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        if driver.cuInit(0) != 0:
            return
        handle = ctypes.c_int()
        if driver.cuDeviceGet(ctypes.byref(handle), index) != 0:
            return
        context = ctypes.c_void_p()
        # retained for the life of the process, as PyTorch retains it too
        driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)
    except (OSError, AttributeError):  # no driver library, or one without these entry points
        return


def start_context_in_background(device: str) -> threading.Thread | None:
    """Start creating the CUDA primary context of ``device`` (``auto``, ``cuda[:N]``; a checked device name) on a
    daemon thread and return the thread; None when there is nothing to do (``cpu``, Linux's driver library absent
    by platform, torch already imported, or turned off by the environment)."""
    index = _device_index(device)
    if index is None or not sys.platform.startswith("linux") or "torch" in sys.modules:
        return None
    if os.environ.get(ENV, "1").strip() == "0":
        return None
    thread = threading.Thread(target=_create_primary_context, args=(index,), name="fusedsim-cuda-context",
                              daemon=True)
    thread.start()
    atexit.register(thread.join, 10.0)  # an early exit (a bad file, say) must not unload the driver mid-call
    return thread
