"""Queuing pairs ahead of reading their values back (PairRunner.run_all, Scorer.submit_prepared, to_device)."""

from __future__ import annotations

import math

import pytest
import torch
from engine_pairs import image_pair

from fusedsim.engine import Scorer
from fusedsim.engine.batch_pairs import DecodedPair, PairRunner, PairTask, metric_columns
from fusedsim.engine.inputs import to_device
from fusedsim.metrics.registry import get_metric

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _pairs(count: int, per_ref: int = 2, bad: tuple[int, ...] = ()) -> list[DecodedPair]:
    """``count`` decoded pairs, ``per_ref`` distorted images per reference; the indices in ``bad`` fail (a
    decoding error, or a distorted image of another size)."""
    out = []
    for i in range(count):
        ref, dist = image_pair(48, 40, seed=i // per_ref)
        _, dist = image_pair(48, 40, seed=100 + i)
        task = PairTask(i, f"r{i // per_ref}.png", f"d{i}.png")
        if i in bad and i % 2:
            out.append(DecodedPair(task, error=f"d{i}.png: cannot read image"))
        elif i in bad:
            small, _ = image_pair(40, 40, seed=i)
            out.append(DecodedPair(task, ref=ref, ref_key=f"r{i // per_ref}", dist=small))
        else:
            out.append(DecodedPair(task, ref=ref, ref_key=f"r{i // per_ref}", dist=dist))
    return out


def _runner(metrics=("ssim", "psnr"), device: str = "cpu") -> PairRunner:
    return PairRunner(Scorer(list(metrics), device=device), metric_columns([get_metric(m) for m in metrics]))


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_outcomes_equal_one_pair_at_a_time_in_order(ahead):
    pairs = _pairs(9, bad=(3, 4))
    expected = [_runner().run(p) for p in pairs]
    runner = _runner()
    got = list(runner.run_all(iter(pairs), ahead))
    assert [o.index for o in got] == list(range(9))
    for e, g in zip(expected, got):
        assert g.error == e.error and g.backend == e.backend
        assert g.values.keys() == e.values.keys()
        assert all(g.values[k] == e.values[k] or (math.isnan(g.values[k]) and math.isnan(e.values[k]))
                   for k in e.values)
    assert "cannot read image" in got[3].error and "size" in got[4].error.lower()
    assert not any(got[i].error for i in (0, 1, 2, 5, 6, 7, 8))
    assert runner.prepared == 5  # references r0..r4, each prepared once


class _Recording:
    """A scorer that logs when pairs are queued and read back."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.log: list[str] = []
        self.fail_on = fail_on
        self.count = 0

    def set_reference(self, ref):
        return self

    def submit_prepared(self, dist):
        n = self.count
        self.count += 1
        self.log.append(f"submit {n}")
        log, fail = self.log, self.fail_on == n

        class Pending:
            def result(self):
                log.append(f"read {n}")
                if fail:
                    raise RuntimeError("CUDA error: an illegal memory access was encountered")
                from fusedsim.engine.scorer import ScoreResult

                return ScoreResult(values={"ssim": float(n)}, backend="cuda full")

        return Pending()


def test_values_are_read_back_after_the_next_pairs_are_queued():
    scorer = _Recording()
    runner = PairRunner(scorer, ["ssim"])
    outcomes = list(runner.run_all(iter(_pairs(4)), ahead=2))
    assert [o.values["ssim"] for o in outcomes] == [0.0, 1.0, 2.0, 3.0]
    assert scorer.log == ["submit 0", "submit 1", "submit 2", "read 0", "submit 3", "read 1", "read 2", "read 3"]


def test_an_error_reported_when_reading_back_fails_only_its_pair():
    runner = PairRunner(_Recording(fail_on=1), ["ssim"])
    outcomes = list(runner.run_all(iter(_pairs(3)), ahead=1))
    assert "illegal memory access" in outcomes[1].error and math.isnan(outcomes[1].values["ssim"])
    assert [o.values["ssim"] for o in (outcomes[0], outcomes[2])] == [0.0, 2.0] and not outcomes[2].error


def test_a_missing_module_stops_the_run_instead_of_failing_every_row(monkeypatch):
    """An ImportError is the installation's fault, which every pair would meet: the runner stops with it (the rows
    already read back are out), wherever it is raised; a pair's own error still fails only that pair."""
    scorer = _Recording()
    real = scorer.submit_prepared

    def submit(dist):
        if scorer.count == 2:
            scorer.count += 1
            raise ModuleNotFoundError("No module named 'platformdirs'")
        return real(dist)

    monkeypatch.setattr(scorer, "submit_prepared", submit)
    outcomes = []
    with pytest.raises(RuntimeError, match="every pair would fail the same way.*No module named 'platformdirs'"):
        for outcome in PairRunner(scorer, ["ssim"]).run_all(iter(_pairs(5)), ahead=0):
            outcomes.append(outcome)
    assert [o.values["ssim"] for o in outcomes] == [0.0, 1.0]


def test_stopping_early_stops_queuing():
    scorer = _Recording()
    outcomes = PairRunner(scorer, ["ssim"]).run_all(iter(_pairs(6)), ahead=1)
    assert next(outcomes).index == 0
    outcomes.close()
    assert scorer.log == ["submit 0", "submit 1", "read 0"]


def test_negative_ahead_is_refused():
    with pytest.raises(ValueError, match="ahead must be >= 0"):
        next(_runner().run_all(iter(_pairs(1)), ahead=-1))


def test_submit_then_result_equals_score():
    ref, dist = image_pair(64, 48)
    scorer = Scorer(["ssim", "psnr", "ssimulacra2"], device="cpu")
    pending = scorer.set_reference(ref).submit_prepared(dist)
    assert isinstance(pending.raw["ssim"], torch.Tensor)  # not read back yet
    assert pending.result() == Scorer(["ssim", "psnr", "ssimulacra2"], device="cpu").score(ref, dist)


def test_to_device_on_the_cpu_is_the_tensor():
    x = torch.arange(12, dtype=torch.uint8).reshape(1, 3, 2, 2)
    assert to_device(x, torch.device("cpu")) is x


@needs_cuda
def test_to_device_goes_through_pinned_memory_and_keeps_values():
    x = torch.randint(1, 256, (1, 3, 67, 45), dtype=torch.uint8)
    expected = x.clone()
    torch.cuda._sleep(50_000_000)  # keep the stream busy: the copy is queued behind this, not done yet
    y = to_device(x, torch.device("cuda"))
    x.fill_(0)  # the host tensor may be reused once the copy is queued: the device copy keeps the old values
    assert y.device.type == "cuda" and torch.equal(y.cpu(), expected)


@needs_cuda
@pytest.mark.parametrize("metric", ["ssim", "ms-ssim", "psnr", "ssimulacra2", "butteraugli", "dssim", "zensim",
                                    "iw-ssim", "cvvdp"])
def test_pairs_queued_ahead_on_the_gpu_keep_their_own_values(metric):
    """A metric whose result lived in a buffer reused by the next call would give queued pairs the last pair's
    value: read back after two more pairs, every value must be the one-at-a-time value."""
    spec = get_metric(metric)
    size = max(64, spec.min_size)
    pairs = []
    for i in range(6):
        ref, _ = image_pair(size, size + 8, seed=i // 2)
        _, dist = image_pair(size, size + 8, seed=50 + i)
        pairs.append(DecodedPair(PairTask(i, f"r{i // 2}", f"d{i}"), ref=ref, ref_key=f"r{i // 2}", dist=dist))
    one_by_one = [_runner([metric], "cuda").run(p) for p in pairs]
    queued = list(_runner([metric], "cuda").run_all(iter(pairs), ahead=2, group=1))  # groups: test_groups.py
    assert [q.values for q in queued] == [o.values for o in one_by_one]
    assert len({next(iter(o.values.values())) for o in one_by_one}) > 1  # the pairs do differ


def _interleaved(image):
    """``image`` with the same pixels in interleaved memory, as the batch decoders read files."""
    from dataclasses import replace

    hwc = image.pixels.permute(0, 2, 3, 1).contiguous()
    return replace(image, pixels=hwc.permute(0, 3, 1, 2))


@pytest.mark.parametrize("layout", ["chw", "hwc", "other"])
def test_memory_order_round_trip(layout):
    from fusedsim.engine.batch_pairs import from_memory_order, memory_order

    x = torch.arange(3 * 4 * 5, dtype=torch.uint8).reshape(1, 3, 4, 5)
    if layout == "hwc":
        x = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    elif layout == "other":
        x = x.transpose(2, 3).contiguous().transpose(2, 3)  # (W, H) memory: copied to the planar order
    flat, got = memory_order(x)
    assert flat.is_contiguous() and got == ("chw" if layout == "other" else layout)
    back = from_memory_order(flat.reshape(-1), tuple(x.shape), got)
    assert torch.equal(back, x)


def test_interleaved_pixels_score_as_planar_ones():
    ref, dist = image_pair(64, 48)
    want = Scorer(["ssim", "psnr", "ssimulacra2"], device="cpu").score(ref, dist).values
    got = Scorer(["ssim", "psnr", "ssimulacra2"], device="cpu").score(_interleaved(ref), _interleaved(dist)).values
    assert got == want
    strips = Scorer(["ssim"], device="cpu", memory="strip:20").score(_interleaved(ref), _interleaved(dist))
    assert strips.backend == "cpu strip 20" and abs(strips.values["ssim"] - want["ssim"]) < 1e-6


@needs_cuda
def test_interleaved_pixels_reach_the_gpu_contiguous():
    x = torch.randint(0, 256, (1, 24, 31, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
    y = to_device(x, torch.device("cuda"))
    assert y.is_contiguous() and torch.equal(y.cpu(), x)


def test_to_device_copies_pageable_memory_when_none_can_be_pinned(monkeypatch):
    """A machine whose locked-memory limit refuses pinned blocks still gets its pixels (synchronously)."""
    calls = []

    class FakeCuda:
        type = "cuda"

    def refuse(*args, **kwargs):
        calls.append(kwargs.get("pin_memory"))
        raise RuntimeError("CUDA error: out of memory (cudaHostAlloc)")

    x = torch.arange(12, dtype=torch.uint8).reshape(1, 3, 2, 2)
    moved = []
    monkeypatch.setattr(torch, "empty_like", refuse)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: False)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, device, **kw: moved.append(device) or self)
    out = to_device(x, FakeCuda())
    assert calls == [True] and len(moved) == 1 and torch.equal(out, x)
