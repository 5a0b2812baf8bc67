"""Launch a jitted Triton kernel with as little host work as Triton allows.

``triton.jit`` functions bind and specialise every argument on every launch (tens of microseconds for kernels
with many arguments). A :class:`Launcher` belongs to a plan whose integer arguments are fixed (the plan is keyed
by shapes, strides and dtypes), so after the first launch it calls the compiled kernel's launcher directly. The
only specialisation that can still change between calls is the 16-byte alignment of the tensors' addresses, so
compiled kernels are kept per alignment pattern. Launch hooks (profilers) are honoured as in Triton's own launch.
Under Triton's interpreter, or on a Triton older than 3.4 (another launcher interface), every launch goes through
``kernel[grid]``.

The steady-state launch is Python generated per argument layout (:func:`_direct_launch`); where Triton's C launch
function has a known layout (3.4-3.6) it is called directly, skipping Triton's Python launcher object
(:func:`_launch_entry`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from fusedsim.core.state import cache_dict

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


_CONSTANTS: dict[tuple, torch.Tensor] = cache_dict()


def device_constants(values: Sequence[float | int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.tensor(values, dtype=dtype, device=device)``, made once per process and reused (never write to it).

    A kernel's scalar constants that must be doubles or int64 travel as a tensor; building it per call would copy
    pageable host memory to the device, which waits for the stream: one host synchronisation per call."""
    key = (tuple(values), dtype, torch.device(device))
    tensor = _CONSTANTS.get(key)
    if tensor is None:
        tensor = _CONSTANTS[key] = torch.tensor(key[0], dtype=dtype, device=key[2])
    return tensor


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
                 "_raw", "fast")

    def __init__(self, kernel, grid: Sequence[int], raw_pointers: bool = False, **options) -> None:
        self.kernel = kernel
        self._raw = raw_pointers
        self.grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        self.options = options
        self._fast = _fast_launch_supported() and _is_compiled_kernel(kernel)
        self._compiled: dict[int, tuple] = {}
        self._tensor_pos: tuple[int, ...] | None = None
        self._first = -1  # position of the first tensor argument (-1: none)
        self._stream_of: Callable[[int], int] | None = None
        # ``launcher.fast(*args)`` launches like ``launcher(*args)`` one Python frame sooner (for hot paths): the
        # launcher itself until the first launch binds the generated steady-state launch (:func:`_direct_launch`)
        self.fast: Callable[..., None] = self._call

    def __call__(self, *args) -> None:
        self.fast(*args)

    def _call(self, *args) -> None:
        """Every launch the direct path does not take: the first, a new device or alignment, launch hooks."""
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
            if self._tensor_pos:
                self.fast = _direct_launch(self, len(args))

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
        entry = self._compiled.get(aligned)
        if entry is None:
            compiled = self.kernel[self.grid](*args, **self.options)
            if compiled is not None:  # None: a jit_cache_hook skipped the compilation and the launch
                self._compiled[aligned] = _launch_entry(compiled)
            return
        direct, compiled = entry
        stream = self._stream_of(device)
        knobs = self._knobs
        grid = self.grid
        enter, exit_ = _active_hook(knobs.launch_enter_hook), _active_hook(knobs.launch_exit_hook)
        if enter is not None or exit_ is not None:  # profilers read the launch metadata and see the tensors
            metadata = compiled.launch_metadata(grid, stream, *args)
            compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, metadata,
                         enter, exit_, *args)
            return
        if direct is not None:
            c_launch, function, head = direct
            c_launch(grid[0], grid[1], grid[2], stream, function, *head, *call_args)
            return
        # exactly Triton's own launch (JITFunction.run) minus argument binding and specialisation
        compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata, None, None, None,
                     *call_args)


# The argument layout of the C launch function that Triton 3.4-3.6 compile per kernel: grid, stream, function,
# cooperative and PDL flags, global and profile scratch, packed metadata, launch metadata, the two launch hooks,
# then the kernel arguments (triton/backends/nvidia/driver.py, ``_BASE_ARGS_FORMAT``).
_C_LAUNCH_LAYOUT = "iiiKKppOOOOOO"


def _launch_entry(compiled) -> tuple:
    """(direct, compiled) for a compiled kernel. ``direct`` = (C launch function, CUfunction, the arguments between
    the function and the kernel's) when the kernel needs no scratch memory and the launcher has the C layout
    above: the launch then skips Triton's Python launcher object, whose call builds two closures and looks up two
    allocators on every launch. Otherwise None: the launch goes through ``compiled.run`` as Triton's own does."""
    run = compiled.run  # loads the module on the current device
    c_launch = getattr(run, "launch", None)
    if (c_launch is None or type(run).__name__ != "CudaLauncher" or _c_launch_layout(run) != _C_LAUNCH_LAYOUT
            or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1)):
        return None, compiled
    head = (run.launch_cooperative_grid, run.launch_pdl, None, None, compiled.packed_metadata, None, None, None)
    return (c_launch, compiled.function, head), compiled


def _direct_launch(launcher: Launcher, n_args: int) -> Callable[..., None]:
    """The launcher's steady-state launch, generated for its argument layout: read the tensors' device and
    addresses, find the compiled kernel for their alignment and call Triton's C launch function with them (see
    :func:`_launch_entry`), with no per-tensor loop or argument list. Anything else (another argument count,
    device or alignment, a kernel without a direct entry, an installed launch hook) goes to ``Launcher._call``."""
    pos = launcher._tensor_pos
    first = pos[0]
    lines = ["def direct(*args):",
             f"    if len(args) != {n_args}:",
             "        return slow(*args)",
             f"    device = args[{first}].get_device()",
             "    if device < 0 or device != current_device():",
             "        return slow(*args)"]
    lines += [f"    p{i} = args[{i}].data_ptr()" for i in pos]
    key = "device"
    for i in pos:
        key = f"({key} << 1) | (p{i} & 15 == 0)"
    lines += [f"    entry = compiled.get({key})",
              "    if entry is None:",
              "        return slow(*args)",
              "    enter, exit_ = knobs.launch_enter_hook, knobs.launch_exit_hook",
              "    if (enter is not None and (type(enter) is not chain or enter.calls)) or (",
              "            exit_ is not None and (type(exit_) is not chain or exit_.calls)):",
              "        return slow(*args)"]
    last = pos[-1]
    passed = ", ".join((f"p{i}" if launcher._raw else f"args[{i}]") if i in pos else f"args[{i}]"
                       for i in range(last + 1))
    passed += f", *args[{last + 1}:]" if last + 1 < n_args else ""
    g0, g1, g2 = launcher.grid
    lines += ["    direct, kernel = entry",
              "    if direct is None:  # Triton's launcher object (other layouts, scratch memory)",
              f"        kernel.run({g0}, {g1}, {g2}, stream_of(device), kernel.function, kernel.packed_metadata, None, "
              f"None, None, {passed})",
              "        return",
              "    c_launch, function, head = direct",
              f"    c_launch({g0}, {g1}, {g2}, stream_of(device), function, *head, {passed})"]
    namespace = {"slow": launcher._call, "current_device": torch._C._cuda_getDevice, "compiled": launcher._compiled,
                 "knobs": launcher._knobs, "chain": type(launcher._knobs.launch_enter_hook),
                 "stream_of": launcher._stream_of}
    name = f"<fusedsim-launch-{getattr(launcher.kernel, '__name__', 'kernel')}>"
    exec(compile("\n".join(lines), name, "exec"), namespace)  # noqa: S102 - source is rendered by this package
    return namespace["direct"]


def _c_launch_layout(run) -> str | None:
    """The C argument layout that the module defining ``run``'s class declares, if any."""
    return getattr(sys.modules.get(type(run).__module__), "_BASE_ARGS_FORMAT", None)
