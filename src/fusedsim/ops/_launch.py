"""Launch a jitted Triton kernel with as little host work as Triton allows.

``triton.jit`` functions bind and specialise every argument on every launch (tens of microseconds for kernels
with many arguments). A :class:`Launcher` belongs to a plan whose integer arguments are fixed (the plan is keyed
by shapes, strides and dtypes), so after the first launch it calls the compiled kernel's launcher directly. The
only specialisation that can still change between calls is the 16-byte alignment of the tensors' addresses, so
compiled kernels are kept per alignment pattern. Under Triton's interpreter, with a launch hook installed (a
profiler), or on a Triton whose launcher interface is unknown, every launch goes through ``kernel[grid]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

_FAST_OK: bool | None = None


def _fast_launch_supported() -> bool:
    """Triton 3.4+ launchers take (grid, stream, function, packed metadata, launch metadata, hooks, *args)."""
    global _FAST_OK
    if _FAST_OK is None:
        import triton

        try:
            major, minor = (int(p) for p in triton.__version__.split(".")[:2])
        except ValueError:  # pragma: no cover - unusual version strings
            major, minor = 0, 0
        _FAST_OK = (major, minor) >= (3, 4) and hasattr(triton, "knobs")
    return _FAST_OK


def _is_compiled_kernel(kernel) -> bool:
    """A kernel jitted for a device (not Triton's interpreter, which is chosen when the kernel is decorated)."""
    from triton.runtime.jit import JITFunction

    return type(kernel) is JITFunction


class Launcher:
    """One kernel, one grid, fixed options: ``launcher(*args)`` with every kernel argument in signature order
    (constexprs included, as Triton's own launcher expects them)."""

    __slots__ = ("kernel", "grid", "options", "_fast", "_compiled", "_tensor_pos", "_stream_of")

    def __init__(self, kernel, grid: Sequence[int], **options) -> None:
        self.kernel = kernel
        self.grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        self.options = options
        self._fast = _fast_launch_supported() and _is_compiled_kernel(kernel)
        self._compiled: dict[int, object] = {}
        self._tensor_pos: tuple[int, ...] | None = None
        self._stream_of: Callable[[int], int] | None = None

    def __call__(self, *args) -> None:
        if not self._fast:
            self.kernel[self.grid](*args, **self.options)
            return
        import triton

        if self._tensor_pos is None:
            self._tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
            self._stream_of = triton.runtime.driver.active.get_current_stream
        aligned = 0
        for i in self._tensor_pos:
            aligned = (aligned << 1) | (args[i].data_ptr() & 15 == 0)
        compiled = self._compiled.get(aligned)
        if compiled is None or triton.knobs.runtime.launch_enter_hook is not None:
            self._compiled[aligned] = self.kernel[self.grid](*args, **self.options)
            return
        g0, g1, g2 = self.grid
        device = args[self._tensor_pos[0]].device.index
        compiled.run(g0, g1, g2, self._stream_of(device), compiled.function, compiled.packed_metadata, None,
                     None, None, *args)
