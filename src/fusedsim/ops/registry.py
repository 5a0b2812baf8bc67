"""The op registry: every kernel op registered once, with its Triton implementation, its PyTorch twin and its
shape function, and one dispatcher.

An op takes tensors first, then scalars: ``op(*tensors, *scalars)``. Its Triton side is a *plan* built from the
tensors' metadata and the scalars (``make_plan(tensors, scalars)``, cached by the kernel module), with
``plan.forward(*tensors) -> (out, saved)`` and, for differentiable ops,
``plan.backward(tensors, saved, grad_out, needs) -> grads`` (one entry per tensor, None where not needed).
From that one definition the registry derives both callers, so eager and compiled runs cannot drift apart:

- eager: one generic ``autograd.Function`` (no dispatcher round trip: tens of microseconds less per call);
- ``torch.compile``: a ``torch.library`` custom op ``fusedsim::<name>`` (+ ``<name>_backward``) with the shape
  function as its fake implementation and the backward wired through ``register_autograd`` (one opaque node,
  no graph break, CUDA-graph capturable).

The twin (``reference``) has the same signature and returns tensors of the same shapes; it is the CPU path and
the oracle of ``tests/ops/test_registry.py``, which runs every registered op against its twin (values and every
gradient) on the op's ``examples``.

An op may also name a compiled CPU implementation (``cpu="module:function"``, same signature as the twin, e.g. a
numba kernel): under ``auto`` it replaces the twin for CPU tensors when its module imports; a forced
``reference`` backend always runs the twin. The registry tests compare it with the twin on the same examples.
"""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from fusedsim.backend import choose_backend, requested_backend

OPS: dict[str, KernelOp] = {}
_IN_CUSTOM_OP = contextvars.ContextVar("fusedsim_in_custom_op", default=False)


def in_compiled_graph() -> bool:
    """True while a custom op runs inside a torch.compile'd graph: kernels then keep no persistent buffers
    (CUDA-graph trees require every allocation made during their warm-up to be an output or freed)."""
    return _IN_CUSTOM_OP.get()


@dataclass(frozen=True)
class Example:
    """Arguments for the generic twin test; ``grads`` lists the tensor positions to differentiate."""

    tensors: tuple[torch.Tensor, ...]
    scalars: tuple = ()
    grads: tuple[int, ...] = ()
    note: str = ""


@dataclass
class KernelOp:
    """One registered op. ``schema`` is the torch.library schema of the forward, e.g.
    ``"(Tensor x, Tensor y, float c) -> Tensor"``; ``fake(*tensors, *scalars)`` returns empty outputs of the right
    shapes; ``examples(device)`` yields :class:`Example` inputs; ``tolerance`` maps a dtype to (values, gradients)
    relative tolerances against the float64 twin (``None``: results must be identical); ``cpu`` optionally names
    a compiled CPU implementation ``"module:function"`` with the twin's signature (see :meth:`cpu_impl`).
    ``triton_by_default=False`` keeps a kernel that has not passed its twin test on a GPU out of ``auto``: GPU
    tensors then run the twin (same algorithm, PyTorch), and the kernel runs only under a forced ``triton``."""

    name: str
    schema: str
    n_tensors: int
    plan_for: str
    reference: Callable[..., torch.Tensor]
    fake: Callable[..., torch.Tensor]
    examples: Callable[[torch.device], list[Example]]
    differentiable: bool = True
    tolerance: dict | None = None
    doc: str = ""
    cpu: str | None = None
    triton_by_default: bool = True
    _plan_factory: Callable | None = field(default=None, repr=False)
    _cpu_fn: Callable | None | bool = field(default=None, repr=False)

    def cpu_impl(self) -> Callable[..., torch.Tensor] | None:
        """The compiled CPU implementation named by ``cpu``, imported on first use; ``None`` when the op has none
        or its module does not import (e.g. numba missing): the twin then stays the CPU path."""
        if self._cpu_fn is None:
            self._cpu_fn = False
            if self.cpu is not None:
                module, attr = self.cpu.split(":")
                try:
                    self._cpu_fn = getattr(importlib.import_module(module), attr)
                except ImportError:
                    self._cpu_fn = False
        return self._cpu_fn or None

    def make_plan(self, tensors: tuple[torch.Tensor, ...], scalars: tuple):
        """The Triton plan for these tensors and scalars. ``plan_for`` is ``"module:attr"``, imported on first use
        (so the twins work without Triton): either a plan factory ``(tensors, scalars) -> plan`` (name ending in
        ``_plan``) or a plain forward-only launcher ``fn(*tensors, *scalars) -> out``."""
        if self._plan_factory is None:
            self.prepare()
        return self._plan_factory(tensors, scalars)

    def prepare(self) -> None:
        """Import the Triton side (Triton, the kernel module, Triton's cached self-hash) without launching
        anything: what the first call would do, e.g. on a thread while the main thread starts the CUDA context."""
        if self._plan_factory is None:
            from fusedsim.ops._triton_key import install_triton_key_cache

            install_triton_key_cache()  # saves Triton's ~0.3 s self-hash in every later process
            module, attr = self.plan_for.split(":")
            target = getattr(importlib.import_module(module), attr)
            self._plan_factory = target if attr.endswith("_plan") else function_plan(target)

    # ---------------------------------------------------------------------------------------------- dispatch
    def __call__(self, *args):
        """Run the op on the backend :func:`fusedsim.backend.choose_backend` picks for its first tensor."""
        tensors = args[: self.n_tensors]
        backend = choose_backend(*tensors, op=self.name)
        if backend == "triton" and not self.triton_by_default and requested_backend() == "auto":
            backend = "reference"  # a kernel not yet validated on a GPU runs only when forced
        if backend == "reference":
            if (self.cpu is not None and requested_backend() == "auto" and not torch.compiler.is_compiling()
                    and all(t.device.type == "cpu" for t in tensors) and not any(t.requires_grad for t in tensors)):
                fn = self.cpu_impl()
                if fn is not None:
                    return fn(*args)
            return self.reference(*args)
        return self.triton(*args)

    def triton(self, *args):
        """The Triton implementation (eager: planned autograd Function; compiling: the custom op)."""
        if torch.compiler.is_compiling():
            define_custom_ops()
            return getattr(torch.ops.fusedsim, self.name)(*args)
        tensors, scalars = args[: self.n_tensors], args[self.n_tensors:]
        return self.run_plan(self.make_plan(tensors, scalars), *tensors)

    def run_plan(self, plan, *tensors):
        """Eager call with a plan the caller already holds (the lean path of the public functions)."""
        if not self.differentiable:
            return plan.forward(*tensors)[0]
        return apply_planned(plan, *tensors)


class PlannedFunction(torch.autograd.Function):
    """Generic eager autograd for planned ops: forward and backward are the plan's."""

    @staticmethod
    def forward(ctx, plan, *tensors):
        # a plan may save state for its backward when it knows which gradients will be asked for
        forward_for_grad = getattr(plan, "forward_for_grad", None)
        if forward_for_grad is not None:
            out, saved = forward_for_grad(ctx.needs_input_grad[1:], *tensors)
        else:
            out, saved = plan.forward(*tensors)
        ctx.plan, ctx.n_tensors = plan, len(tensors)
        ctx.save_for_backward(*tensors, *saved)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        stored = ctx.saved_tensors
        tensors, saved = stored[: ctx.n_tensors], stored[ctx.n_tensors:]
        grads = ctx.plan.backward(tensors, saved, grad_out, ctx.needs_input_grad[1:])
        return (None, *grads)


def _direct_apply():
    """``PlannedFunction.apply`` without its Python front (a signature bind check and a generator over the
    arguments on every call, about a microsecond of a training call's host time): the C entry, reached when no
    functorch transform is active, after the one thing the front does then, unwrapping dead functorch wrappers.
    Under a transform (or a PyTorch without these entry points) the public ``apply``, which handles it."""
    functorch = getattr(torch._C, "_functorch", None)
    unwrap = getattr(functorch, "unwrap_if_dead", None)
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    if unwrap is None or active is None:
        return PlannedFunction.apply
    c_apply = super(torch.autograd.Function, PlannedFunction).apply
    public_apply = PlannedFunction.apply

    def apply(plan, *tensors):
        if active():
            return public_apply(plan, *tensors)
        return c_apply(plan, *map(unwrap, tensors))

    return apply


apply_planned = _direct_apply()


_CUSTOM_OPS: set[str] = set()  # ops whose custom ops exist


def define_custom_ops() -> bool:
    """Define the ``fusedsim::<name>`` custom ops of every registered op that has none yet; returns True.

    They exist for ``torch.compile`` only, and defining them costs ~2-5 ms per op, so they are made on the first
    call traced by dynamo rather than at import (which every CLI call would pay). Dynamo runs this function at
    trace time instead of tracing it: it carries the mark ``torch.compiler.assume_constant_result`` sets, set by
    hand so that importing this module does not import dynamo (dynamo marks its own helpers the same way).
    """
    for name, op in list(OPS.items()):
        if name not in _CUSTOM_OPS:
            _define_custom_ops(op)
            _CUSTOM_OPS.add(name)
    return True


define_custom_ops._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _define_custom_ops(op: KernelOp) -> None:
    """``fusedsim::<name>`` (and ``<name>_backward``) for torch.compile, from the same plan."""
    lib_name = f"fusedsim::{op.name}"
    n = op.n_tensors

    def forward_impl(*args):
        tensors, scalars = args[:n], args[n:]
        token = _IN_CUSTOM_OP.set(True)
        try:
            out = op.make_plan(tensors, scalars).forward(*tensors)[0]
        finally:
            _IN_CUSTOM_OP.reset(token)
        # custom-op outputs may not alias inputs or each other
        return out.clone() if out._base is not None else out

    torch.library.custom_op(lib_name, forward_impl, mutates_args=(), schema=op.schema)
    torch.library.register_fake(lib_name, op.fake)
    if not op.differentiable:
        return
    inputs = op.schema.split("->")[0].strip()[1:-1]
    tensor_params = ", ".join(f"Tensor t{i}" for i in range(n))
    scalar_params = inputs.split(",")[n:]
    bwd_schema = (f"({tensor_params}, Tensor grad_out, bool[] needs"
                  + "".join("," + p for p in scalar_params) + ") -> Tensor[]")

    def backward_impl(*args):
        tensors, grad_out, needs, scalars = args[:n], args[n], args[n + 1], args[n + 2:]
        plan = op.make_plan(tensors, scalars)
        token = _IN_CUSTOM_OP.set(True)
        try:
            grads = plan.backward(tensors, (), grad_out, needs)
        finally:
            _IN_CUSTOM_OP.reset(token)
        return [g if g is not None else t.new_empty(0) for g, t in zip(grads, tensors)]

    def backward_fake(*args):
        tensors, needs = args[:n], args[n + 1]
        return [torch.empty_like(t) if need else t.new_empty(0) for t, need in zip(tensors, needs)]

    torch.library.custom_op(f"{lib_name}_backward", backward_impl, mutates_args=(), schema=bwd_schema)
    torch.library.register_fake(f"{lib_name}_backward", backward_fake)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:n])
        ctx.scalars = tuple(inputs[n:])

    def backward(ctx, grad_out):
        tensors = ctx.saved_tensors
        needs = list(ctx.needs_input_grad[:n])
        grads = getattr(torch.ops.fusedsim, f"{op.name}_backward")(*tensors, grad_out, needs, *ctx.scalars)
        return (*[g if need else None for g, need in zip(grads, needs)], *[None] * len(ctx.scalars))

    torch.library.register_autograd(lib_name, backward, setup_context=setup_context)


class FunctionPlan:
    """Plan of a forward-only op whose launcher needs no per-shape preparation: ``fn(*tensors, *scalars)``."""

    def __init__(self, fn: Callable[..., torch.Tensor], scalars: tuple) -> None:
        self.fn, self.scalars = fn, scalars

    def forward(self, *tensors):
        return self.fn(*tensors, *self.scalars), ()


def function_plan(fn: Callable[..., torch.Tensor]) -> Callable[[tuple, tuple], FunctionPlan]:
    return lambda tensors, scalars: FunctionPlan(fn, tuple(scalars))


def register_op(op: KernelOp) -> KernelOp:
    """Register ``op`` once: dispatcher entry, custom ops for torch.compile (on first need), enrolment in the twin
    tests."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    OPS[op.name] = op
    if _CUSTOM_OPS:  # registered after the others were defined: define it now, eagerly
        define_custom_ops()
    return op


def registered_ops() -> Sequence[KernelOp]:
    """Every op, after importing the modules that define them."""
    from fusedsim.ops.catalog import load_all

    load_all()

    return tuple(OPS.values())
