"""One device resolver for the whole package (API and CLI): ``auto``, ``cpu`` or ``cuda[:N]``.

:func:`check_device_name` is torch-free, so the CLI checks ``--device`` while parsing its arguments;
:func:`resolve_device` then turns the name into a ``torch.device`` and checks that the GPU exists.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["DEVICE_HELP", "check_device_name", "resolve_device"]

DEVICE_HELP = "auto, cpu or cuda[:N]"
_NAME = re.compile(r"auto|cpu|cuda(?::\d+)?")


def _error(device: object) -> ValueError:
    return ValueError(f"device must be {DEVICE_HELP}; got {device!r}")


def check_device_name(device: str) -> str:
    """``device`` normalised (stripped, lower case) if it reads ``auto``, ``cpu`` or ``cuda[:N]``; else ValueError."""
    if not isinstance(device, str):
        raise TypeError(f"device must be a str or torch.device; got {type(device).__name__}")
    name = device.strip().lower()
    if not _NAME.fullmatch(name):
        raise _error(device)
    return name


def resolve_device(device: torch.device | str = "auto") -> torch.device:
    """The ``torch.device`` for ``device``: ``auto`` is the first GPU when CUDA is available, else the CPU.

    Raises ``ValueError`` for any other name (``gpu``, ``mps``, ...) and
    :class:`~fusedsim.core.backend.BackendUnavailableError` when a CUDA device is asked for but not present.
    """
    import torch

    if isinstance(device, torch.device):
        if device.type not in ("cpu", "cuda"):
            raise _error(str(device))
        dev = device
    else:
        name = check_device_name(device)
        if name == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dev = torch.device(name)
    if dev.type == "cuda":
        from fusedsim.core.backend import BackendUnavailableError

        if not torch.cuda.is_available():
            raise BackendUnavailableError(f"device {str(dev)!r} was asked for, but CUDA is not available: PyTorch "
                                          "sees no CUDA device on this machine; use cpu or auto")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            visible = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
            raise BackendUnavailableError(f"device {str(dev)!r} was asked for, but PyTorch sees only {count} CUDA "
                                          f"device{'s' if count != 1 else ''} ({visible})")
    return dev
