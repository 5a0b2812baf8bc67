"""Compilations shared out among warm-up processes (issue 36, cold start): each kernel specialisation is claimed by
exactly one process, which compiles it; the others skip that launch."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fusedsim.engine.compile_claims import claim, claim_hook, share_compilations


def _claim_all(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if claim(Path(folder), n)]


def test_each_name_is_claimed_by_exactly_one_of_racing_processes(tmp_path):
    names = [f"kernel{i}" for i in range(200)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        won = pool.starmap(_claim_all, [(str(tmp_path), names)] * 4)
    assert sorted(n for mine in won for n in mine) == sorted(names)  # none twice, none lost


def test_the_hook_compiles_what_it_claims_and_skips_what_another_process_claimed(tmp_path):
    ours, theirs = claim_hook(tmp_path), claim_hook(tmp_path)  # two processes' hooks on one folder
    blur = SimpleNamespace(module="fusedsim.families.x", name="_blur_kernel")
    other = SimpleNamespace(module="fusedsim.families.x", name="_pool_kernel")
    key = ("[('*fp32', 'D'), ('i32', 'D')]", "{'num_warps': 4}")
    assert ours(key=key, fn=blur, repr="", compile={}) is False  # claimed: compile and launch
    assert theirs(key=key, fn=blur) is True  # skip: the first process compiles it
    assert theirs(key=("[('*fp32', ''), ('i32', 'D')]", "{'num_warps': 4}"), fn=blur) is False  # another specialisation
    assert theirs(key=key, fn=other) is False  # another kernel with the same arguments
    assert len(list(tmp_path.iterdir())) == 3


def test_share_compilations_installs_the_hook_in_triton(tmp_path, monkeypatch):
    from triton import knobs

    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", None)
    assert share_compilations(tmp_path) is True
    assert knobs.runtime.jit_cache_hook(key="k", fn=SimpleNamespace(module="m", name="f")) is False
    assert knobs.runtime.jit_cache_hook(key="k", fn=SimpleNamespace(module="m", name="f")) is True


def test_shared_warmup_processes_start_at_different_calls_and_do_not_mark(monkeypatch, tmp_path):
    from fusedsim.engine import warmup

    seen = []
    monkeypatch.setattr(warmup, "warm_metric", lambda m, device, h, w, params, phase, mark: seen.append(
        (m, phase, mark)) or warmup.WarmupResult(m, 0.1, device))
    import fusedsim.engine.compile_claims as claims_module

    monkeypatch.setattr(claims_module, "share_compilations", lambda folder: True)
    work = [("a", "one"), ("b", "one"), ("b", "shared")]
    out = warmup._warm_shared(work, "cuda", 8, 8, {}, str(tmp_path), 4)
    assert [(m, p) for m, p, _ in seen] == [("b", "one"), ("b", "shared"), ("a", "one")]  # from index 4 % 3
    assert {mark for _, _, mark in seen} == {False}  # a process that skipped launches leaves no marker
    assert [(m, p) for m, p, _ in out] == [("b", "one"), ("b", "shared"), ("a", "one")]


def test_a_shared_warmup_error_is_the_metrics_only_when_every_process_had_it():
    from fusedsim.engine.warmup import WarmupResult, summarize

    done = [("ssim", WarmupResult("ssim", 1.0, "cuda:0", "too small")),
            ("ssim", WarmupResult("ssim", 2.0, "cuda:0", "too small")),
            ("dssim", WarmupResult("dssim", 3.0, "cuda:0", "values left unwritten")),
            ("dssim", WarmupResult("dssim", 1.5, "cuda:0"))]
    ssim, dssim = summarize(["ssim", "dssim"], done, shared=True)
    assert (ssim.error, ssim.seconds) == ("too small", 2.0)
    assert (dssim.error, dssim.seconds) == ("", 3.0)
    assert summarize(["dssim"], done, shared=False)[0].error == "values left unwritten"  # one process per call


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_claimed_specialisation_is_neither_compiled_nor_launched_here(tmp_path, monkeypatch):
    import triton
    import triton.language as tl
    from triton import knobs

    @triton.jit
    def fill(out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.full((BLOCK,), 1.0, tl.float32), mask=offs < n)

    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", None)
    share_compilations(tmp_path)
    for entry in list(tmp_path.iterdir()):
        entry.unlink()
    out = torch.zeros(16, device="cuda")
    fill[(1,)](out, 16, BLOCK=16)  # claimed here: compiled and launched
    assert out.sum().item() == 16
    assert len(list(tmp_path.iterdir())) == 1
    fill.device_caches.clear()  # as in another process, which has not loaded it: the claim file decides
    out[:] = 0
    fill[(1,)](out, 16, BLOCK=16)
    assert out.sum().item() == 0  # claimed by the first "process": skipped here
    fill[(1,)](out, 16, BLOCK=32)  # another specialisation: claimed, compiled, launched
    assert out.sum().item() == 16
