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
import pkgutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fusedsim.core.backend import BackendUnavailableError, choose_backend, requested_backend

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
    relative tolerances against the float64 twin (``None``: results must be identical).

    Implementations register themselves where they are defined: a kernel module decorates its plan factory with
    :meth:`triton_plan` (or a plain forward launcher with :meth:`triton_launcher`), a numba module its kernel with
    :meth:`cpu_kernel`. ``load_triton`` / ``load_cpu`` import those modules (plain ``import`` statements in the
    family's ``ops.py``), on first use, so the twins run where Triton or numba is missing.
    ``triton_by_default=False`` keeps a kernel that has not passed its twin test on a GPU out of ``auto``: GPU
    tensors then run the twin (same algorithm, PyTorch), and the kernel runs only under a forced ``triton``."""

    name: str
    schema: str
    n_tensors: int
    reference: Callable[..., torch.Tensor]
    fake: Callable[..., torch.Tensor]
    examples: Callable[[torch.device], list[Example]]
    load_triton: Callable[[], None] | None = None
    load_cpu: Callable[[], None] | None = None
    differentiable: bool = True
    tolerance: dict | None = None
    doc: str = ""
    triton_by_default: bool = True
    _plan_factory: Callable | None = field(default=None, repr=False)
    _cpu_fn: Callable | None = field(default=None, repr=False)
    _cpu_loaded: bool = field(default=False, repr=False)

    # ------------------------------------------------------------------------------------ registration
    def triton_plan(self, factory: Callable) -> Callable:
        """Decorator: ``factory(tensors, scalars) -> plan`` is this op's Triton side."""
        self._set_plan(factory)
        return factory

    def triton_launcher(self, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        """Decorator: ``fn(*tensors, *scalars) -> out``, a forward-only launcher needing no per-shape plan, is this
        op's Triton side."""
        self._set_plan(function_plan(fn))
        return fn

    def cpu_kernel(self, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        """Decorator: ``fn`` (the twin's signature, e.g. a numba kernel) replaces the twin on CPU tensors under
        ``auto``; a forced ``reference`` backend always runs the twin."""
        if self._cpu_fn is not None and self._cpu_fn is not fn:
            raise ValueError(f"op {self.name!r} already has a CPU kernel")
        self._cpu_fn = fn
        return fn

    def _set_plan(self, factory: Callable) -> None:
        if self._plan_factory is not None:
            raise ValueError(f"op {self.name!r} already has a Triton plan")
        self._plan_factory = factory

    @property
    def has_cpu_kernel(self) -> bool:
        return self.load_cpu is not None

    def cpu_impl(self) -> Callable[..., torch.Tensor] | None:
        """The compiled CPU implementation, imported on first use; ``None`` when the op has none or its module
        does not import (e.g. numba missing): the twin then stays the CPU path."""
        if not self._cpu_loaded:
            self._cpu_loaded = True
            if self.load_cpu is not None:
                try:
                    self.load_cpu()
                except ImportError:
                    self._cpu_fn = None
                    return None
                if self._cpu_fn is None:
                    raise RuntimeError(f"op {self.name!r}: its CPU module imported but registered no kernel "
                                       f"(decorate it with @{self.name}.cpu_kernel)")
        return self._cpu_fn

    def make_plan(self, tensors: tuple[torch.Tensor, ...], scalars: tuple):
        """The Triton plan for these tensors and scalars (the kernel modules are imported on first use)."""
        factory = self._plan_factory
        if factory is None:
            self.prepare()
            factory = self._plan_factory
        return factory(tensors, scalars)

    def prepare(self) -> None:
        """Import the Triton side (Triton, the kernel modules, Triton's cached self-hash) without launching
        anything: what the first call would do, e.g. on a thread while the main thread starts the CUDA context."""
        if self._plan_factory is None:
            if self.load_triton is None:
                raise BackendUnavailableError(f"op {self.name!r} has no Triton kernel")
            from fusedsim.core.triton_key import install_triton_key_cache

            install_triton_key_cache()  # saves Triton's ~0.3 s self-hash in every later process
            self.load_triton()
            if self._plan_factory is None:
                raise RuntimeError(f"op {self.name!r}: its kernel modules imported but registered no plan "
                                   f"(decorate its plan with @{self.name}.triton_plan)")

    # ---------------------------------------------------------------------------------------------- dispatch
    def backend_for(self, *tensors: torch.Tensor, compiled_cpu: bool = True) -> str:
        """The one place a backend is chosen: ``"triton"``, ``"cpu"`` (the compiled CPU kernel) or ``"reference"``
        (the twin) for this op on ``tensors``. ``auto`` takes Triton on CUDA/ROCm tensors, the compiled CPU kernel
        on CPU tensors without gradients (``compiled_cpu=False``: never), the twin elsewhere; a forced backend
        that cannot run raises :class:`BackendUnavailableError`, naming the op. Tensors on the ``meta`` device
        get ``"meta"``: the op's shape function (they hold no values, so there is nothing for a kernel to compute)."""
        if tensors and tensors[0].device.type == "meta":
            return "meta"
        backend = choose_backend(*tensors, op=self.name, triton_supported=self.load_triton is not None)
        if backend == "triton":
            if not self.triton_by_default and requested_backend() == "auto":
                return "reference"  # a kernel not yet validated on a GPU runs only when forced
            return backend
        if (compiled_cpu and self.load_cpu is not None and requested_backend() == "auto"
                and not torch.compiler.is_compiling() and all(t.device.type == "cpu" for t in tensors)
                and not any(t.requires_grad for t in tensors) and self.cpu_impl() is not None):
            return "cpu"
        return "reference"

    def __call__(self, *args):
        """Run the op on the backend :meth:`backend_for` picks for its tensors."""
        backend = self.backend_for(*args[: self.n_tensors])
        if backend == "triton":
            return self.triton(*args)
        if backend == "cpu":
            return self._cpu_fn(*args)
        if backend == "meta":
            return self.meta(*args)
        return self.reference(*args)

    def meta(self, *args):
        """The op on meta tensors: outputs of the right shapes (the shape function), on the meta device, with
        gradients of the inputs' shapes when an input needs one."""
        if not self.differentiable or not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self.fake(*args)
        return _MetaShapes.apply(self.fake, *args)

    def bind(self, example: tuple[torch.Tensor, torch.Tensor], fixed: tuple[torch.Tensor, ...] = (),
             scalars: tuple = ()):
        """This op on a pair, bound to the backend chosen for tensors like the ``example`` pair, with trailing
        ``fixed`` tensors (a window, weights) and ``scalars``: ``call(x, y) -> out``. The lean path of the public
        functions, which keep the call in a :class:`~fusedsim.core.calls.CallTable` keyed by the tensors' metadata: on Triton the
        plan is built once (no dispatcher round trip, no autograd node when nothing needs a gradient). A bound call
        may be reused with and without gradients, so it never takes a compiled CPU kernel (the twin is the
        differentiable CPU path)."""
        from fusedsim.core.calls import KernelCall, TwinCall

        if len(example) != 2:
            raise ValueError(f"{self.name}: bind takes an example pair of tensors; got {len(example)}")
        backend = self.backend_for(*example, compiled_cpu=False)
        if backend == "triton":
            return KernelCall(self, example, fixed, scalars)
        return TwinCall(self.meta if backend == "meta" else self.reference, fixed, scalars)

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


class _MetaShapes(torch.autograd.Function):
    """Autograd of an op on meta tensors: the shape function forward, meta gradients of the inputs' shapes back
    (so ``loss.backward()`` on a meta model runs, as it does for PyTorch's own ops)."""

    @staticmethod
    def forward(ctx, fake, *args):
        ctx.inputs = [(a.shape, a.dtype) if isinstance(a, torch.Tensor) else None for a in args]
        return fake(*args)

    @staticmethod
    def backward(ctx, *grads):
        needs = ctx.needs_input_grad[1:]
        return (None, *(torch.empty(shape_dtype[0], dtype=shape_dtype[1], device="meta") if need and shape_dtype
                         else None for shape_dtype, need in zip(ctx.inputs, needs)))


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


def require_twin_only(name: str, *tensors: torch.Tensor) -> None:
    """For a computation that has only its PyTorch form (no op, no kernel): raise if ``triton`` is forced, never
    a silent PyTorch run under that name."""
    choose_backend(*tensors, op=name, triton_supported=False)


def op_modules() -> tuple[str, ...]:
    """Every module that declares ops, found on disk: the ``ops.py`` of each shared building block
    (``fusedsim/core/<block>/``) and of each family (``fusedsim/families/<family>/``). Nothing lists them by hand."""
    import fusedsim.core
    import fusedsim.families

    found = []
    for package in (fusedsim.core, fusedsim.families):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.ispkg and (Path(package.__path__[0]) / info.name / "ops.py").is_file():
                found.append(f"{package.__name__}.{info.name}.ops")
    return tuple(found)


def load_all() -> None:
    """Register every op (imports every ops module: twins and declarations, no kernels)."""
    for module in op_modules():
        importlib.import_module(module)


def registered_ops() -> Sequence[KernelOp]:
    """Every op, after importing the modules that declare them."""
    load_all()
    return tuple(OPS.values())


def op(name: str) -> KernelOp:
    """The registered op ``name`` (importing every family's declarations if it is not registered yet). Code that
    launches an op imports it from its family's ``ops`` module instead; this look-up is for tools and tests."""
    if name not in OPS:
        load_all()
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown op {name!r}; registered ops: {', '.join(sorted(OPS))}") from None


def prepare_in_background(ops: Iterable[KernelOp]) -> threading.Thread | None:
    """Import the Triton side of ``ops`` on a daemon thread (:meth:`KernelOp.prepare`) and return it.

    A GPU command's first kernel waits for ``import triton``, the kernel module and Triton's self-hash (~0.2 s),
    and for the CUDA context (~0.3 s), one after the other; started before the context, this overlaps them.
    Never raises: a failure here is met again, and reported, by the call that needs the op. ``None`` when there
    is nothing to prepare or Triton is not installed."""
    import importlib.util

    ops = tuple(ops)
    if not ops or importlib.util.find_spec("triton") is None:
        return None

    def work() -> None:
        try:
            for kernel_op in ops:
                kernel_op.prepare()
        except Exception:  # noqa: BLE001 - the foreground call reports it with its context
            pass

    thread = threading.Thread(target=work, name="fusedsim-prepare", daemon=True)
    thread.start()
    return thread
