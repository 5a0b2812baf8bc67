"""The lean launcher treats Triton's empty launch-hook chain as "no hook" and keeps any installed hook."""

from __future__ import annotations

import pytest

from fusedsim.core.launch import _active_hook

knobs = pytest.importorskip("triton.knobs")


def test_empty_hook_chain_counts_as_no_hook():
    chain = knobs.HookChain()
    assert _active_hook(chain) is None
    assert _active_hook(None) is None


def test_installed_hooks_are_kept():
    chain = knobs.HookChain()
    seen = []
    chain.add(seen.append)
    assert _active_hook(chain) is chain
    _active_hook(chain)("launch")
    assert seen == ["launch"]

    def plain(metadata):  # Triton < 3.5 stores a bare callable
        return metadata

    assert _active_hook(plain) is plain
