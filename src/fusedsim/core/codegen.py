"""Build Triton kernels from generated source.

The separable-window kernels keep one register accumulator per pending output row, so their source depends on
the window size K (a Python list of tensors cannot live in a Triton loop). Each variant is rendered once as
source text, registered in ``linecache`` so that ``inspect.getsource`` (which ``triton.jit`` relies on) finds it,
executed, and jitted. With ``FUSEDSIM_DUMP_KERNELS=DIR`` each rendered source is also written to ``DIR/<name>.py``
so that a generated kernel can be read, diffed or profiled line by line outside the process.
"""

from __future__ import annotations

import contextlib
import itertools
import linecache
import os
import pathlib
import tempfile
from collections.abc import Callable, Sequence

DUMP_ENV = "FUSEDSIM_DUMP_KERNELS"


def indent(lines: list[str], levels: int = 1) -> list[str]:
    pad = "    " * levels
    return [pad + line if line else line for line in lines]


# numbers the generated sources' file names, so that each stays in linecache under its own name (not a cache:
# never reset)
_SOURCE_NUMBERS = itertools.count(1)


def dump_dir() -> pathlib.Path | None:
    """The directory named by ``FUSEDSIM_DUMP_KERNELS``, or None; read per call so that tests and long sessions
    can switch dumping on and off without re-importing."""
    value = os.environ.get(DUMP_ENV)
    return pathlib.Path(value) if value else None


def dump_source(name: str, source: str, directory: pathlib.Path) -> pathlib.Path:
    """Write ``source`` to ``directory/<name>.py`` atomically (temporary file, then ``os.replace``), so that
    processes compiling the same variant at once never leave a half-written file; the last writer wins."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}.py"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(source)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def jit_from_source(name: str, source: str, do_not_specialize: Sequence[str] = ()) -> Callable:
    """Execute ``source`` (which defines a function ``name``) and return it wrapped by ``triton.jit``.
    ``do_not_specialize`` names integer arguments whose values change between launches of one plan. The source
    is also dumped to :func:`dump_dir` when that is set."""
    import triton
    import triton.language as tl

    directory = dump_dir()
    if directory is not None:
        dump_source(name, source, directory)
    filename = f"<fusedsim-generated-{name}-{next(_SOURCE_NUMBERS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {"tl": tl, "triton": triton, "__name__": f"fusedsim.generated.{name}"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - source is rendered by this package
    return triton.jit(namespace[name], do_not_specialize=list(do_not_specialize))
