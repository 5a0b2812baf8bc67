"""Autocast switched off around the twins' statistics, on every device type PyTorch can run them on."""

from __future__ import annotations

import contextlib

import torch

__all__ = ["autocast_off"]


def autocast_off(device: torch.device) -> contextlib.AbstractContextManager:
    """A context in which autocast does not run ``device``'s convolutions in 16 bits (the windowed statistics need
    the accumulation dtype). Meta tensors have no autocast (``torch.autocast("meta")`` raises) and no values to
    round, so they get a no-op context: shape propagation runs the twins unchanged."""
    if device.type == "meta":
        return contextlib.nullcontext()
    return torch.autocast(device.type, enabled=False)
