"""Pairs scored in groups: PairRunner's grouping and Scorer.submit_group (one call per perceptual metric)."""

from __future__ import annotations

import math

import pytest
import torch
from engine_pairs import image_pair

from fusedsim.engine import Scorer
from fusedsim.engine.batch_pairs import DecodedPair, PairRunner, PairTask, metric_columns
from fusedsim.engine.ladder import InjectedOOM, set_fault_hook
from fusedsim.metrics.registry import get_metric

PERCEPTUAL = ["ssimulacra2", "butteraugli", "dssim", "zensim", "iw-ssim", "cvvdp"]


@pytest.fixture
def groups_on_cpu(monkeypatch):
    """Groups are stacked on GPUs only (scorer.GROUP_DEVICES); these tests run the same code on the CPU twins."""
    from fusedsim.engine import scorer

    monkeypatch.setattr(scorer, "GROUP_DEVICES", ("cuda", "cpu"))


def _pair(i: int, key: str, size: tuple[int, int] = (40, 48), error: str = "", dist_size=None) -> DecodedPair:
    h, w = size
    ref, _ = image_pair(h, w, seed=sum(map(ord, key)))
    _, dist = image_pair(*(dist_size or size), seed=100 + i)
    task = PairTask(i, f"{key}.png", f"d{i}.png")
    return DecodedPair(task, error=error) if error else DecodedPair(task, ref=ref, ref_key=key, dist=dist)


def _indices(groups) -> list[list[int]]:
    return [[p.task.index for p in g] for g in groups]


def test_groups_share_a_reference_or_have_one_each():
    keys = "aaaabbcdeffff"
    pairs = [_pair(i, k) for i, k in enumerate(keys)]
    got = _indices(PairRunner._groups(iter(pairs), 3))
    # a a a | a b | b c d e | ... : a shared group ends when the reference changes, a distinct one when it repeats
    assert got == [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9], [10, 11, 12]]
    assert _indices(PairRunner._groups(iter(pairs), 1)) == [[i] for i in range(len(keys))]


def test_a_failed_or_mismatched_pair_is_a_group_of_its_own():
    pairs = [_pair(0, "a"), _pair(1, "a"), _pair(2, "a", error="d2.png: cannot read image"), _pair(3, "a"),
             _pair(4, "a", dist_size=(40, 40)), _pair(5, "a"), _pair(6, "b", size=(48, 48)),
             _pair(7, "c", size=(48, 48))]
    # pair 6 has another size than pair 5's group: a new group, which pair 7 (same size, own reference) joins
    assert _indices(PairRunner._groups(iter(pairs), 8)) == [[0, 1], [2], [3], [4], [5], [6, 7]]


def _runner(metrics) -> PairRunner:
    return PairRunner(Scorer(list(metrics), device="cpu"), metric_columns([get_metric(m) for m in metrics]))


def _equal(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class _CountCalls:
    """Counts the calls of a metric's compute functions and the images each call scores."""

    def __init__(self, monkeypatch, spec) -> None:
        self.images: list[int] = []
        import dataclasses

        from fusedsim.metrics import registry

        spies = {}
        for attr in ("compute", "score_prepared"):
            original = spec.load(attr)

            def spy(*args, _original=original, **kwargs):
                self.images.append(int(args[1].shape[0]))
                return _original(*args, **kwargs)

            spies[attr] = spy
        monkeypatch.setitem(registry._FUNCTIONS, spec.name, dataclasses.replace(spec.implementation(), **spies))


@pytest.mark.parametrize("metric", PERCEPTUAL)
@pytest.mark.parametrize("per_ref", [3, 1], ids=["shared", "own"])
def test_grouped_scores_equal_one_pair_at_a_time(metric, per_ref, monkeypatch, groups_on_cpu):
    """Every perceptual metric scores a group in one call; each pair's values are its one-at-a-time values (to
    the float64 rounding of the CPU twins' batch-shaped reductions: zensim moves by 3e-14), next to a
    non-grouped metric and a pair that fails."""
    spec = get_metric(metric)
    size = (max(40, spec.min_size), max(48, spec.min_size + 8))
    pairs = [_pair(i, f"r{i // per_ref}", size) for i in range(7)]
    pairs[4] = _pair(4, "r1", size, dist_size=(size[0], size[1] - 2))  # a distorted image of another size
    metrics = [metric, "ssim"]
    expected = [_runner(metrics).run(p) for p in pairs]
    calls = _CountCalls(monkeypatch, spec)
    got = list(_runner(metrics).run_all(iter(pairs), ahead=2, group=3))
    assert [o.index for o in got] == list(range(7))
    assert "size" in got[4].error.lower() and not any(o.error for i, o in enumerate(got) if i != 4)
    for e, g in zip(expected, got):
        assert g.backend == e.backend and g.values.keys() == e.values.keys()
        for column, value in e.values.items():
            assert _equal(g.values[column], value) or abs(g.values[column] - value) <= 1e-12 * abs(value), column
    # shared: r0 r0 r0 | r1 | r1 (fails) | r1 r2 (own references) ; own: 0 1 2 | 3 | 4 (fails) | 5 6
    assert calls.images == [3, 1, 2]


def test_a_prepared_state_for_one_image_only_scores_a_shared_group_pair_by_pair(monkeypatch, groups_on_cpu):
    """A metric whose prepared reference serves one image (``prepared_broadcasts=False``) is scored pair by pair
    against a shared reference, and still in one call when each pair has its own reference."""
    from dataclasses import replace

    spec = replace(get_metric("ssimulacra2"), prepared_broadcasts=False)
    for per_ref, images in ((3, [1, 1, 1, 1, 1]), (1, [3, 2])):
        pairs = [_pair(i, f"r{i // per_ref}") for i in range(5)]
        runner = _runner(["ssimulacra2"])
        runner.scorer.specs = [spec]
        calls = _CountCalls(monkeypatch, spec)
        got = list(runner.run_all(iter(pairs), group=3))
        assert calls.images == images and not any(o.error for o in got)


def test_a_group_out_of_memory_goes_pair_by_pair(groups_on_cpu):
    """The group's call runs out of memory: its pairs go through the ladder one by one, with the same values."""
    pairs = [_pair(i, "a") for i in range(4)]
    expected = [_runner(["ssimulacra2"]).run(p) for p in pairs]
    attempts = []

    def hook(metric, backend):
        attempts.append(backend)
        if len(attempts) == 1:
            raise InjectedOOM("out of memory (injected)")

    previous = set_fault_hook(hook)
    try:
        got = list(_runner(["ssimulacra2"]).run_all(iter(pairs), ahead=0, group=4))
    finally:
        set_fault_hook(previous)
    assert attempts == ["cpu full"] * 5  # the group, then each pair
    assert [g.values for g in got] == [e.values for e in expected] and not any(g.error for g in got)


class _RecordingGroups:
    """A scorer that logs when groups are queued and pairs read back."""

    scores_groups = True

    def __init__(self) -> None:
        self.log: list[str] = []
        self.count = 0

    def set_reference(self, ref):
        return self

    def submit_prepared(self, dist):
        return self.submit_group([(None, dist)])[0]

    def submit_group(self, pairs):
        first, self.count = self.count, self.count + len(pairs)
        self.log.append(f"submit {first}-{self.count - 1}")
        log = self.log

        class Pending:
            def __init__(self, n):
                self.n = n

            def result(self):
                log.append(f"read {self.n}")
                from fusedsim.engine.scorer import ScoreResult

                return ScoreResult(values={"ssim": float(self.n)}, backend="cuda full")

        return [Pending(n) for n in range(first, self.count)]


def test_the_last_group_stays_queued_while_the_one_before_is_read_back():
    scorer = _RecordingGroups()
    pairs = [_pair(i, "a") for i in range(7)]
    outcomes = list(PairRunner(scorer, ["ssim"]).run_all(iter(pairs), ahead=2, group=3))
    assert [o.values["ssim"] for o in outcomes] == [float(i) for i in range(7)]
    assert scorer.log == ["submit 0-2", "submit 3-5", "read 0", "read 1", "read 2", "submit 6-6", "read 3",
                          "read 4", "read 5", "read 6"]
    scorer = _RecordingGroups()
    list(PairRunner(scorer, ["ssim"]).run_all(iter(pairs[:4]), ahead=0, group=2))  # ahead 0: read at once
    assert scorer.log == ["submit 0-1", "read 0", "read 1", "submit 2-3", "read 2", "read 3"]


def test_bad_group_size_is_refused():
    with pytest.raises(ValueError, match="group must be >= 1"):
        next(_runner(["ssimulacra2"]).run_all(iter([_pair(0, "a")]), group=0))


def test_image_metrics_are_not_grouped(groups_on_cpu):
    """SSIM, MS-SSIM and PSNR return the mean of a stacked call, so the scorer does not group them."""
    assert not Scorer(["ssim", "ms-ssim", "psnr"], device="cpu").scores_groups
    assert Scorer(["ssim", "ssimulacra2"], device="cpu").scores_groups


def test_the_cpu_scores_pair_by_pair():
    assert not Scorer(["ssimulacra2"], device="cpu").scores_groups


def test_submit_group_refuses_pairs_of_different_sizes(groups_on_cpu):
    a, b = _pair(0, "a"), _pair(1, "b", size=(48, 48))
    with pytest.raises(ValueError, match="differ in size"):
        Scorer(["ssimulacra2"], device="cpu").submit_group([(a.ref, a.dist), (b.ref, b.dist)])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("metric", PERCEPTUAL)
def test_gpu_grouped_scores_equal_one_pair_at_a_time(metric):
    """On a GPU: a group's stacked call gives each pair its one-at-a-time value (float32 kernels: to 1e-6
    relative, the reduction order per image may follow the batch's shape)."""
    spec = get_metric(metric)
    size = max(64, spec.min_size)
    for per_ref in (3, 1):
        pairs = [_pair(i, f"r{i // per_ref}", (size, size + 8)) for i in range(6)]
        runner = PairRunner(Scorer([metric], device="cuda"), metric_columns([spec]))
        one = [runner.run(p) for p in pairs]
        got = list(PairRunner(Scorer([metric], device="cuda"), metric_columns([spec])).run_all(iter(pairs), group=3))
        for o, g in zip(one, got):
            for column, value in o.values.items():
                assert abs(g.values[column] - value) <= 1e-6 * max(1.0, abs(value)), (per_ref, column)
        assert len({next(iter(o.values.values())) for o in one}) > 1
