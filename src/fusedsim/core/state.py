"""Process state: the one owner of everything fusedsim keeps between calls.

Repeated calls skip their setup because the package keeps it per process: kernel plans and launchers, call tables,
device tables (windows, lookup tables, weights), per-stream scratch buffers and side streams. Each holder of such
state registers here once, where it is defined (at import), so that :func:`reset` can drop them all: after a test
patches a constant a plan was built from, when a long session wants its device memory back, or before timing a
cold call. Nothing else should need to know which private caches exist.

Registration costs nothing per call: :func:`cached` returns the plain ``functools.lru_cache`` wrapper (the same C
object, so ``torch.compile`` treats it as before), and :func:`cache_dict` / :func:`register` return the very object
they were given. Holders are module-level objects that live as long as the process, so they are held strongly; an
object made per instance should not register (it goes with its owner).

Imports nothing heavy (no torch): ``import fusedsim`` stays light.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, overload

__all__ = ["Clearable", "cache_dict", "cached", "register", "registered", "reset"]

T = TypeVar("T")


class Clearable(Protocol):
    """A holder of state: ``clear()`` drops what it keeps (a dict, a :class:`~fusedsim.core.calls.CallTable`)."""

    def clear(self) -> None: ...


H = TypeVar("H", bound=Clearable)

_CLEARERS: list[Callable[[], None]] = []  # one per holder, in registration order
_LOCK = threading.Lock()


def register(holder: H) -> H:
    """Have :func:`reset` clear ``holder`` (anything with ``clear()``); returns ``holder`` itself."""
    with _LOCK:
        _CLEARERS.append(holder.clear)
    return holder


def cache_dict() -> dict[Any, Any]:
    """A plain, registered dict: for module-level caches keyed by hand (e.g. a table per device)."""
    return register({})


@overload
def cached(maxsize: Callable[..., T], /) -> functools._lru_cache_wrapper[T]: ...


@overload
def cached(maxsize: int | None = 128, *, typed: bool = False) -> Callable[[Callable[..., T]],
                                                                      functools._lru_cache_wrapper[T]]: ...


def cached(maxsize: Any = 128, *, typed: bool = False) -> Any:
    """``functools.lru_cache(maxsize, typed)`` whose cache :func:`reset` clears: ``@cached(maxsize=64)``,
    ``@cached(maxsize=None)`` (unbounded, as ``functools.cache``) or bare ``@cached`` (128 entries). The result is
    the ``lru_cache`` wrapper itself: no extra Python work per call."""
    if callable(maxsize):  # bare @cached
        return cached()(maxsize)

    def decorate(fn: Callable[..., T]) -> functools._lru_cache_wrapper[T]:
        wrapper = functools.lru_cache(maxsize=maxsize, typed=typed)(fn)
        with _LOCK:
            _CLEARERS.append(wrapper.cache_clear)
        return wrapper

    return decorate


def registered() -> int:
    """How many holders :func:`reset` clears (for tests and diagnostics)."""
    return len(_CLEARERS)


def reset() -> None:
    """Clear every registered holder: plans, call tables, device tables, scratch buffers, side streams. The next
    call of each public function rebuilds what it needs and returns the same values as before.

    Safe at any time between calls, from a thread that is not inside a call. Not during a CUDA graph capture;
    and a graph captured before ``reset`` may read device tables (windows, lookup tables) that ``reset`` let go of:
    capture again after it. Tensors that callers hold stay valid: only fusedsim's own references are dropped."""
    with _LOCK:
        clearers = tuple(_CLEARERS)
    for clear in clearers:
        clear()
