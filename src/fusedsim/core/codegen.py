"""Build Triton kernels from generated source.

The separable-window kernels keep one register accumulator per pending output row, so their source depends on
the window size K (a Python list of tensors cannot live in a Triton loop). Each variant is rendered once as
source text, registered in ``linecache`` so that ``inspect.getsource`` (which ``triton.jit`` relies on) finds it,
executed, and jitted.
"""

from __future__ import annotations

import functools
import linecache
from collections.abc import Callable, Sequence


def indent(lines: list[str], levels: int = 1) -> list[str]:
    pad = "    " * levels
    return [pad + line if line else line for line in lines]


@functools.lru_cache(maxsize=None)
def _counter() -> list[int]:
    return [0]


def jit_from_source(name: str, source: str, do_not_specialize: Sequence[str] = ()) -> Callable:
    """Execute ``source`` (which defines a function ``name``) and return it wrapped by ``triton.jit``.
    ``do_not_specialize`` names integer arguments whose values change between launches of one plan."""
    import triton
    import triton.language as tl

    count = _counter()
    count[0] += 1
    filename = f"<fusedsim-generated-{name}-{count[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {"tl": tl, "triton": triton, "__name__": f"fusedsim.ops.generated.{name}"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - source is rendered by this package
    return triton.jit(namespace[name], do_not_specialize=list(do_not_specialize))
