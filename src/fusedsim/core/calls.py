"""Call tables: the lean host path of the public functions.

A public call is looked up by its arguments' metadata (shapes, strides, dtypes, devices, options, the requested
backend) in a table of validated *calls*; only a miss validates and plans. A call then runs the op's plan
directly: no dispatcher, no argument binding, no autograd node when nothing needs a gradient. SSIM, MS-SSIM,
the L1+SSIM loss, LNCC and the warp keep one table each.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fusedsim.core import state
from fusedsim.core.backend import requested_backend


def typed_key(value: object) -> object:
    """``value`` with every leaf paired with its type (tuples and lists recursively, as tuples).

    Python's ``==`` (and so a dict lookup) equates ``11`` with ``11.0`` and ``True`` with ``1``: a key of bare
    values would let a call whose option has the wrong type reuse the call validated for the right type, so
    validation would depend on what was called before. With the types in the key the wrong type misses and is
    validated (and refused) every time."""
    if type(value) is tuple:
        types = tuple(map(type, value))  # in C: the common case (flat options) costs a fraction of a microsecond
        if tuple not in types and list not in types:
            return (value, types)
        if list not in types:  # nested tuples (e.g. ssim's K): only they recurse, the flat leaves keep `types`
            return (value, types, tuple([typed_key(item) for item in value if type(item) is tuple]))
        return (tuple, tuple(typed_key(item) for item in value))
    if type(value) is list:
        return (list, tuple(typed_key(item) for item in value))
    return (type(value), value)


class CallTable:
    """Validated calls by key, cleared when full (keys are metadata: a workload uses a handful). Each table
    registers with :mod:`fusedsim.core.state` (tables are module-level: one per public function family), so
    :func:`fusedsim.core.state.reset` empties it."""

    __slots__ = ("_calls", "_limit")

    def __init__(self, limit: int = 512) -> None:
        self._calls: dict[tuple, Callable] = {}
        self._limit = limit
        state.register(self)

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, key: tuple | None, build: Callable[[], Callable]) -> Callable:
        """The call for ``key`` (``None``: not cacheable, e.g. a user window), building it on a miss."""
        if key is None:
            return build()
        key = typed_key(key)
        try:
            call = self._calls.get(key)
        except TypeError:  # an unhashable part: not cacheable
            return build()
        if call is None:
            call = self._add(key, build())
        return call

    def for_pair(self, options: tuple, a: object, b: object, build: Callable[[], Callable]) -> Callable:
        """The call for tensors like ``a``, ``b`` with hashable ``options``: keyed by the options and the metadata
        that fixes validation and the kernel plan (shapes, strides, dtypes, devices, the requested backend), the
        options by type as well as value (:func:`typed_key`). Not tensors, or an unhashable option: ``build()``,
        whose validation names the argument."""
        return self.for_pair_pinned(typed_key(options), a, b, build)

    def for_pair_pinned(self, options: tuple, a: object, b: object, build: Callable[[], Callable]) -> Callable:
        """:meth:`for_pair` for options whose types the caller has pinned (each one the function's own default
        object, compared by identity, or checked by type): keyed by value alone. The training hot path: a call with
        default options skips :func:`typed_key` (a few tenths of a microsecond, issue 38's cost). The options'
        first item must name the caller (a string), so these keys never equal :meth:`for_pair`'s (a typed key's
        first item is a tuple)."""
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return build()
        key = (options, a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device,
               requested_backend())
        try:
            call = self._calls.get(key)
        except TypeError:  # an unhashable option (e.g. a list for a string): build() names it
            return build()
        if call is None:
            call = self._add(key, build())
        return call

    def _add(self, key: tuple, call: Callable) -> Callable:
        if len(self._calls) >= self._limit:
            self._calls.clear()
        self._calls[key] = call
        return call

    def clear(self) -> None:
        self._calls.clear()


class KernelCall:
    """An op on a pair bound to Triton (:meth:`fusedsim.core.registry.KernelOp.bind`): its plan for tensors like the
    example pair and fixed trailing tensors (window, weights): ``call(x, y)``, the training hot path (no loop, no
    generator: a call costs what the old per-op call object cost)."""

    __slots__ = ("device_index", "extra", "op", "plan", "_with_grad")

    def __init__(self, op, example: tuple, extra: tuple, scalars: tuple) -> None:
        from fusedsim.core.registry import apply_planned

        self.op = op
        self.plan = op.make_plan((*example, *extra), scalars)
        self.extra = extra
        device = example[0].device
        self.device_index = device.index if device.type == "cuda" else None
        # what a call that records a graph runs: the op's run_plan, without its frame
        self._with_grad = apply_planned if op.differentiable else op.run_plan

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        idx = self.device_index
        if idx is not None and idx != torch._C._cuda_getDevice():  # Triton launches on the current device
            with torch.cuda.device(idx):
                return self(x, y)
        if (x.requires_grad or y.requires_grad) and torch.is_grad_enabled():
            return self._with_grad(self.plan, x, y, *self.extra)
        return self.plan.forward(x, y, *self.extra)[0]


class TwinCall:
    """An op bound to its PyTorch twin with fixed trailing tensors and scalars: ``call(*tensors) = fn(*tensors,
    *fixed, *scalars)``."""

    __slots__ = ("fixed", "fn", "scalars")

    def __init__(self, fn: Callable, fixed: tuple, scalars: tuple) -> None:
        self.fn, self.fixed, self.scalars = fn, fixed, scalars

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.fn(*tensors, *self.fixed, *self.scalars)


__all__ = ["CallTable", "KernelCall", "TwinCall", "typed_key"]
