"""Launch a jitted Triton kernel with as little host work as Triton allows.

``triton.jit`` functions bind and specialise every argument on every launch (tens of microseconds for kernels
with many arguments). A :class:`Launcher` belongs to a plan whose integer arguments are fixed (the plan is keyed
by shapes, strides and dtypes), so after the first launch it calls the compiled kernel's launcher directly. The
only specialisation that can still change between calls is the 16-byte alignment of the tensors' addresses, so
compiled kernels are kept per alignment pattern. Launch hooks (profilers) are honoured as in Triton's own launch.
Under Triton's interpreter, or on a Triton older than 3.4 (another launcher interface), every launch goes through
``kernel[grid]``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

F = TypeVar("F", bound=Callable)

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


def _active_hook(hook):
    """``hook``, or None when no hook is installed: Triton 3.5+ keeps launch hooks in a ``HookChain`` that is never
    None (an empty chain still costs a Python call per launch, and ``launch_metadata`` a dict)."""
    if hook is None or not getattr(hook, "calls", True):
        return None
    return hook


def register_cap(device: torch.device, maxnreg: int | None) -> dict:
    """Triton's ``maxnreg`` compile option where it exists (CUDA), nothing elsewhere: launch options."""
    return {"maxnreg": maxnreg} if maxnreg and device.type == "cuda" and torch.version.hip is None else {}


def on_tensors_device(fn: F) -> F:
    """Run ``fn`` with the CUDA device of its first tensor argument current: for functions that launch with
    Triton's own ``kernel[grid](...)``, which compiles for and launches on the current device (a
    :class:`Launcher` switches by itself)."""

    @functools.wraps(fn)
    def on_device(*args, **kwargs):
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.is_cuda and a.device.index != torch._C._cuda_getDevice():
                    with torch.cuda.device(a.device):
                        return fn(*args, **kwargs)
                break
        return fn(*args, **kwargs)

    return on_device  # type: ignore[return-value]


def _is_compiled_kernel(kernel) -> bool:
    """A kernel jitted for a device (not Triton's interpreter, which is chosen when the kernel is decorated)."""
    from triton.runtime.jit import JITFunction

    return type(kernel) is JITFunction


class Launcher:
    """One kernel, one grid, fixed options: ``launcher(*args)`` with every kernel argument in signature order
    (constexprs included, as Triton's own launcher expects them). ``raw_pointers=True`` hands the tensors to
    Triton's launcher as addresses, which skips its per-tensor checks (a ``data_ptr`` call and a driver query of
    the pointer, a few microseconds a launch): only for plans whose callers guarantee every tensor lives on the
    plan's device.

    Triton compiles for and launches on the *current* device; a launcher runs each call on its tensors' device
    (its first tensor's; launchers are shared by plans that are not keyed by device), switching the current device
    when it differs, and keeps its compiled kernels per device."""

    __slots__ = ("kernel", "grid", "options", "_fast", "_compiled", "_tensor_pos", "_first", "_stream_of", "_knobs",
                 "_raw")

    def __init__(self, kernel, grid: Sequence[int], raw_pointers: bool = False, **options) -> None:
        self.kernel = kernel
        self._raw = raw_pointers
        self.grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        self.options = options
        self._fast = _fast_launch_supported() and _is_compiled_kernel(kernel)
        self._compiled: dict[int, object] = {}
        self._tensor_pos: tuple[int, ...] | None = None
        self._first = -1  # position of the first tensor argument (-1: none)
        self._stream_of: Callable[[int], int] | None = None

    def __call__(self, *args) -> None:
        if self._tensor_pos is None:
            self._bind(args)
        device = args[self._first].get_device() if self._first >= 0 else -1  # -1: CPU (the interpreter)
        if device >= 0 and device != torch._C._cuda_getDevice():
            with torch.cuda.device(device):
                self._launch(args, device)
            return
        self._launch(args, device)

    def _bind(self, args: tuple) -> None:
        self._tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        self._first = self._tensor_pos[0] if self._tensor_pos else -1
        if self._fast:
            import triton

            self._stream_of = triton.runtime.driver.active.get_current_stream
            self._knobs = triton.knobs.runtime

    def _launch(self, args: tuple, device: int) -> None:
        if not self._fast:
            self.kernel[self.grid](*args, **self.options)
            return
        aligned = device  # the key of a compiled kernel: the device, then one alignment bit per tensor
        if self._raw:  # the addresses replace the tensors (see the class docstring)
            call_args = list(args)
            for i in self._tensor_pos:
                ptr = args[i].data_ptr()
                call_args[i] = ptr
                aligned = (aligned << 1) | (ptr & 15 == 0)
        else:
            call_args = args
            for i in self._tensor_pos:
                aligned = (aligned << 1) | (args[i].data_ptr() & 15 == 0)
        compiled = self._compiled.get(aligned)
        if compiled is None:
            self._compiled[aligned] = self.kernel[self.grid](*args, **self.options)
            return
        # exactly Triton's own launch (JITFunction.run) minus argument binding and specialisation
        stream = self._stream_of(device)
        knobs = self._knobs
        grid = self.grid
        enter, exit_ = _active_hook(knobs.launch_enter_hook), _active_hook(knobs.launch_exit_hook)
        if enter is not None or exit_ is not None:  # profilers read the launch metadata and see the tensors
            metadata = compiled.launch_metadata(grid, stream, *args)
            compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, metadata,
                         enter, exit_, *args)
            return
        compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, None, None, None,
                     *call_args)
