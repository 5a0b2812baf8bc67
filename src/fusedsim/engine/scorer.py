"""``Scorer``: score image pairs with a set of registered metrics, choosing device and memory mode per metric.

For each metric the scorer walks the OOM ladder (:mod:`fusedsim.engine.ladder`) from the first step that the
memory mode allows: GPU full -> GPU strip -> CPU full -> CPU strip. ``auto`` starts with full when the metric's
estimated working set fits the device budget (:mod:`fusedsim.engine.memory`), else with strips sized to fit it.
Metrics without a strip path (``halo_rows`` None) always run full. Steps that ran out of memory before on this
machine for a pair at least as large are skipped, and every downgrade is reported in
:attr:`ScoreResult.downgrades`.

A cached reference (:meth:`Scorer.set_reference`) is prepared once per metric and device: metrics with
``cached_reference=True`` keep their prepared state; the others keep the reference pixels on the device.

:meth:`Scorer.submit_group` queues several pairs of one size: each perceptual metric scores them in one call
(the distorted images stacked against the prepared reference, or both sides stacked when every pair has its own
reference), which costs the host one call's launches instead of one per pair; the other metrics, and any group
that does not fit the device budget in full mode, go pair by pair through the ladder.

:meth:`Scorer.submit_prepared` queues a pair's work and returns a :class:`PendingScore` whose ``result()`` reads
the values back: a caller that submits the next pair before reading the last one keeps the GPU busy while the
host prepares the next pair (reading a value back waits for the device).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from fusedsim.core.device import resolve_device
from fusedsim.engine.bench_cache import BenchCache, load_bench_cache
from fusedsim.engine.chooser import CONTEXTS, Choice, Task, choose
from fusedsim.engine.inputs import check_min_size, metric_input, pair_output, result_values, to_device
from fusedsim.engine.ladder import (
    Step,
    is_oom,
    record_failure,
    recorded_failure,
    run_fault_hook,
)
from fusedsim.engine.memory import (
    MemoryMode,
    budget_bytes,
    parse_memory,
    strip_rows_for_budget,
    warn_cap_once,
)
from fusedsim.engine.strips import can_strip, plan_strips, score_strips
from fusedsim.io.images import ImageData, check_image_pair
from fusedsim.metrics.registry import MetricSpec, get_metric

__all__ = ["PendingScore", "ScoreResult", "Scorer"]

_KINDS = ("image", "srgb")
#: device types on which :meth:`Scorer.submit_group` stacks pairs into one call: a GPU call's cost is mostly the
#: host's launches, which a group shares; on the CPU the work is the arithmetic, and a stacked call measured slower
#: (SSIMULACRA2 at 256², 2 cores: 44 -> 31 pairs/s with one reference per pair, 108 -> 66 with ten per reference)
GROUP_DEVICES: tuple[str, ...] = ("cuda",)


@dataclass
class ScoreResult:
    """Scores of one pair.

    Attributes:
        values: ``{metric: float}``, or ``{metric: {field: float}}`` for metrics with several outputs.
        backend: where the metrics ran, e.g. ``"cuda full"``, ``"cuda strip 512"``, ``"cpu full"``; when metrics
            ran on different backends, ``"ssim=cuda full, ms-ssim=cpu full"``.
        downgrades: what the OOM ladder did and why, one line each (empty when nothing was downgraded).
        backends: ``{metric: backend}``.
    """

    values: dict[str, float | dict[str, float]]
    backend: str
    downgrades: list[str] = field(default_factory=list)
    backends: dict[str, str] = field(default_factory=dict)


@dataclass
class PendingScore:
    """A pair's scores as the metrics returned them (device tensors, possibly still being computed).

    ``result()`` reads them back (waiting for the device) as a :class:`ScoreResult`; the outputs are tensors of
    their own, so later pairs never overwrite them.
    """

    specs: list[MetricSpec]
    raw: dict[str, Any]
    backends: dict[str, str]
    downgrades: list[str]

    def result(self) -> ScoreResult:
        values = {spec.name: result_values(spec, self.raw[spec.name]) for spec in self.specs}
        distinct = set(self.backends.values())
        backend = distinct.pop() if len(distinct) == 1 else ", ".join(f"{k}={v}" for k, v in self.backends.items())
        return ScoreResult(values=values, backend=backend, downgrades=self.downgrades, backends=self.backends)


def _specs(metrics: Sequence[str] | str) -> list[MetricSpec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, Sequence) or not metrics:
        raise ValueError("metrics must name at least one metric")
    specs = []
    for name in metrics:
        spec = get_metric(name)
        if spec.kind not in _KINDS:
            raise ValueError(f"metrics: {spec.name} is a {spec.kind} metric; the Scorer scores image pairs "
                             "(use fusedsim.families.vmaf for video features)")
        if spec not in specs:
            specs.append(spec)
    return specs


def _check_image(image: object, name: str) -> ImageData:
    if not isinstance(image, ImageData):
        raise TypeError(f"{name} must be a fusedsim.io.images.ImageData (see read_image); got {type(image).__name__}")
    return image


class Scorer:
    """Score pairs of :class:`~fusedsim.io.images.ImageData` with ``metrics``.

    Args:
        metrics: registry names or aliases (``fusedsim list-metrics``), image or perceptual metrics.
        device: ``auto`` (the GPU when there is one), ``cpu``, ``cuda[:N]`` or a ``torch.device``.
        memory: ``auto``, ``full``, ``strip`` (body rows from the budget) or strip body rows as an int or
            ``"strip:ROWS"``.
        params: per-metric keyword parameters, ``{metric: {name: value}}`` (keys may be aliases).
        context: ``"one-shot"`` or ``"batch"`` to let the chooser (:mod:`fusedsim.engine.chooser`) pick the first
            step from this machine's bench cache (``fusedsim bench``) when ``memory="auto"``; with
            ``device="auto"`` it may pick the CPU on a GPU machine (a small one-shot job does not pay for a CUDA
            context). None (default), or no fresh cache: the fixed ladder.

    Example::

        scorer = Scorer(["ssim", "psnr"], memory="strip:512")
        result = scorer.score(read_image("a.png"), read_image("b.png"))
        result.values  # {"ssim": 0.93, "psnr": 31.2}
    """

    def __init__(self, metrics: Sequence[str] | str, *, device: torch.device | str = "auto",
                 memory: str | int | MemoryMode = "auto", params: Mapping[str, Mapping[str, Any]] | None = None,
                 context: str | None = None):
        if context is not None and context not in CONTEXTS:
            raise ValueError(f"context must be one of {', '.join(CONTEXTS)} or None; got {context!r}")
        self.context = context
        self._auto_device = isinstance(device, str) and device.strip().lower() == "auto"
        self._bench: BenchCache | None = None
        self._bench_loaded = False
        self.choices: dict[str, Choice] = {}  # the chooser's last decision per metric (with its candidates)
        self.specs = _specs(metrics)
        self.device = resolve_device(device)
        self.memory = parse_memory(memory)
        self.params: dict[str, dict[str, Any]] = {s.name: {} for s in self.specs}
        for name, values in (params or {}).items():
            spec = get_metric(name)
            if spec.name not in self.params:
                raise ValueError(f"params: {name!r} is not one of the scorer's metrics "
                                 f"({', '.join(self.params)})")
            if not isinstance(values, Mapping):
                raise TypeError(f"params[{name!r}] must be a dict of keyword parameters")
            self.params[spec.name] = spec.check_params(values)  # before any image: a bad value fails at once
        self._ref: ImageData | None = None
        self._prepared: dict[tuple[str, str], Any] = {}  # (metric, device) -> prepared state or ref pixels
        self._dist_inputs: dict[tuple[str, str], torch.Tensor] = {}  # (kind, device) -> dist input, one call

    @property
    def metrics(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def scores_groups(self) -> bool:
        """Whether :meth:`submit_group` can score a group in one call for any of the metrics (the perceptual
        ones); for the others it is :meth:`submit_prepared` pair by pair."""
        return any(self._groupable(spec) for spec in self.specs)

    def __repr__(self) -> str:
        return f"Scorer({self.metrics!r}, device={str(self.device)!r}, memory={str(self.memory)!r})"

    # ------------------------------------------------------------------------------------------ public API
    def set_reference(self, ref: ImageData) -> Scorer:
        """Keep ``ref`` for :meth:`score_prepared`; each metric prepares it on first use. Returns ``self``."""
        ref = _check_image(ref, "ref")
        if ref is not self._ref:
            self._ref = ref
            self._prepared.clear()
        return self

    def score(self, ref: ImageData, dist: ImageData) -> ScoreResult:
        """Score ``dist`` against ``ref`` (the reference is cached: the same ``ref`` object again reuses it)."""
        return self.set_reference(ref).score_prepared(dist)

    def score_prepared(self, dist: ImageData) -> ScoreResult:
        """Score ``dist`` against the reference given to :meth:`set_reference`."""
        return self.submit_prepared(dist).result()

    def submit_prepared(self, dist: ImageData) -> PendingScore:
        """Queue the scoring of ``dist`` against the reference given to :meth:`set_reference` without waiting for
        the values (see :class:`PendingScore`). Errors found on the host (sizes, out of memory: the ladder) are
        raised here; ``result()`` raises only what the device reports."""
        if self._ref is None:
            raise RuntimeError("call set_reference(ref) before score_prepared(dist)")
        ref, dist = self._ref, _check_image(dist, "dist")
        check_image_pair(ref, dist)
        check_min_size(self.specs, ref.width, ref.height)
        return self._submit_pair(ref, dist, {}, 0)

    def submit_group(self, pairs: Sequence[tuple[ImageData, ImageData]]) -> list[PendingScore | Exception]:
        """Queue ``pairs`` ``(ref, dist)``, all of one size, channel count and bit depth, as :meth:`submit_prepared`
        would one by one, with one call per perceptual metric for the whole group where the metric's first step
        is full mode and the group's working set fits its budget (else pair by pair). Either every pair shares
        one reference object (it becomes the scorer's reference, prepared once, and the distorted images are
        stacked against it) or each has its own (both sides are stacked and scored one-shot). Returns per pair
        its :class:`PendingScore`, or the exception that pair raised on the host; a device error in a shared call
        is reported by every pair of the group."""
        if not pairs:
            return []
        ref0 = _check_image(pairs[0][0], "ref")
        for ref, dist in pairs:
            check_image_pair(ref0, _check_image(ref, "ref"))
            check_image_pair(ref0, _check_image(dist, "dist"))
        check_min_size(self.specs, ref0.width, ref0.height)
        shared = all(ref is ref0 for ref, _ in pairs)
        if shared and ref0 is not self._ref:
            self.set_reference(ref0)
        grouped: dict[str, tuple[list[Any], str]] = {}
        try:
            for spec in self.specs:
                step = self._group_step(spec, ref0, len(pairs), shared)
                if step is not None:
                    outputs = self._run_group(spec, step, pairs, shared)
                    if outputs is not None:
                        grouped[spec.name] = outputs, self._label(spec, step, ref0)
        finally:
            self._dist_inputs.clear()
        pending: list[PendingScore | Exception] = []
        for i, (ref, dist) in enumerate(pairs):
            try:
                pending.append(self._submit_pair(ref, dist, grouped, i))
            except Exception as exc:  # this pair's own error; the others go on
                pending.append(exc)
        return pending

    def _submit_pair(self, ref: ImageData, dist: ImageData, grouped: Mapping[str, tuple[list[Any], str]],
                     index: int) -> PendingScore:
        """One pair's :class:`PendingScore`: for the metrics in ``grouped`` (``{metric: (outputs, backend)}`` of
        a group call) its part ``index``, for the others the ladder (``ref`` becomes the scorer's reference)."""
        raw: dict[str, Any] = {}
        backends: dict[str, str] = {}
        downgrades: list[str] = []
        try:
            for spec in self.specs:
                if spec.name in grouped:
                    outputs, backends[spec.name] = grouped[spec.name]
                    raw[spec.name] = outputs[index]
                    continue
                if ref is not self._ref:
                    self.set_reference(ref)
                raw[spec.name], backends[spec.name] = self._run_ladder(spec, ref, dist, downgrades)
        finally:
            self._dist_inputs.clear()
        return PendingScore(self.specs, raw, backends, downgrades)

    def _groupable(self, spec: MetricSpec) -> bool:
        # perceptual metrics return one value per image of a stacked call (image metrics return the mean)
        return (spec.kind == "srgb" and spec.cached_reference and self.device.type in spec.devices
                and self.device.type in GROUP_DEVICES)

    def _group_step(self, spec: MetricSpec, ref: ImageData, count: int, shared: bool) -> Step | None:
        """The step on which ``spec`` scores a group of ``count`` pairs like ``ref`` in one call, or None: only
        perceptual metrics (their calls return one value per image), against one shared reference only those whose
        prepared state serves several images (``prepared_broadcasts``), only the ladder's first step in full mode,
        never one that ran out of memory before, and only when ``count`` pairs fit that device's budget."""
        if count < 2 or not self._groupable(spec) or (shared and not spec.prepared_broadcasts):
            return None
        step = self.steps(spec, ref)[0]
        if step.device_type not in GROUP_DEVICES or (step.mode == "strip" and not self._one_strip(spec, step, ref)):
            return None
        channels = int(ref.pixels.shape[1])
        if recorded_failure(spec.name, step, ref.height, ref.width, channels) is not None:
            return None
        group_bytes = count * spec.working_set_bytes(ref.height, ref.width, 3)
        return step if group_bytes <= budget_bytes(torch.device(step.device)) else None

    def _run_group(self, spec: MetricSpec, step: Step, pairs: Sequence[tuple[ImageData, ImageData]],
                   shared: bool) -> list[Any] | None:
        """Per pair, its part of one call of ``spec`` on the whole group; None when that call fails on the host
        (out of memory included): the pairs then go through the ladder one by one, each with its own outcome."""
        device = torch.device(step.device)
        ref0 = pairs[0][0]
        try:
            run_fault_hook(spec.name, step)
            y = self._dist_inputs.get((spec.kind, str(device)))
            if y is None:  # metrics of one kind share the stacked distorted pixels
                dist = torch.cat([to_device(d.pixels, device) for _, d in pairs])
                y = self._dist_inputs[(spec.kind, str(device))] = metric_input(spec, dist, ref0.data_range, "DIST")
            if shared:
                out = spec.score(self._reference_state(spec, ref0, device), y, self.params[spec.name])
            else:
                refs = torch.cat([to_device(r.pixels, device) for r, _ in pairs])
                x = metric_input(spec, refs, ref0.data_range, "REF")
                out = spec.compute(x, y, self.params[spec.name])
        except Exception as exc:
            if is_oom(exc):
                self._release(step)
            return None
        return [pair_output(out, i) for i in range(len(pairs))]

    # ------------------------------------------------------------------------------------------ ladder
    def steps(self, spec: MetricSpec, ref: ImageData) -> list[Step]:
        """The ladder of ``spec`` for a pair like ``ref``, from the first step the memory mode allows."""
        devices = [self.device] if self.device.type == "cpu" else [self.device, torch.device("cpu")]
        devices = [d for d in devices if d.type in spec.devices] or [torch.device("cpu")]
        strip_ok = can_strip(spec)
        mode = self.memory.mode
        steps: list[Step] = []
        for dev in devices:
            name = str(dev)
            if mode in ("auto", "full") or not strip_ok:
                steps.append(Step(name, "full"))
            if mode in ("auto", "strip") and strip_ok:
                steps.append(Step(name, "strip", self._strip_rows(spec, ref, dev)))
        chosen = self._chosen_step(spec, ref, steps) if self.context and mode == "auto" else None
        if chosen is not None:  # the chooser's step, then the rest of the ladder below it
            rungs = [s.rung for s in steps]
            return [chosen, *steps[rungs.index(chosen.rung) + 1:]]
        if mode == "auto" and strip_ok:  # full only when the estimate fits the budget
            steps = [s for s in steps if s.mode == "strip" or self._fits(spec, ref, torch.device(s.device))]
        return steps

    def _chosen_step(self, spec: MetricSpec, ref: ImageData, ladder: list[Step]) -> Step | None:
        """The chooser's first step for ``spec`` among the rungs of ``ladder`` (None: no usable decision)."""
        if not self._bench_loaded:
            self._bench, self._bench_loaded = load_bench_cache(), True
        if self._bench is None:
            return None
        devices = {s.device_type: s.device for s in ladder}
        if not self._auto_device:  # a device the user named is kept; the chooser picks only the memory mode
            devices = {self.device.type: str(self.device)}
        channels = spec.input_channels(int(ref.pixels.shape[1]))
        usable = [m for m in self._bench.measurements if m.backend.partition(" ")[0] in devices]
        budgets = {kind: budget_bytes(torch.device(name)) for kind, name in devices.items()}
        cache = BenchCache(self._bench.identity, self._bench.created, usable, self._bench.cold_seconds)
        choice = choose(cache, Task(spec.name, ref.height, ref.width, channels, budgets), self.context or "batch")
        self.choices[spec.name] = choice
        if choice.backend is None:
            return None
        device_type, _, rest = choice.backend.partition(" ")
        mode, _, rows = rest.partition(" ")
        step = Step(devices[device_type], mode, int(rows) if rows.isdigit() else None)
        return step if step.rung in [s.rung for s in ladder] else None

    def _fits(self, spec: MetricSpec, ref: ImageData, device: torch.device) -> bool:
        channels = spec.input_channels(int(ref.pixels.shape[1]))
        return spec.working_set_bytes(ref.height, ref.width, channels) <= budget_bytes(device)

    def _strip_rows(self, spec: MetricSpec, ref: ImageData, device: torch.device) -> int:
        if self.memory.rows:
            return self.memory.rows
        channels = spec.input_channels(int(ref.pixels.shape[1]))
        per_row = spec.bytes_per_pixel * ref.width * channels
        rows = strip_rows_for_budget(per_row, int(spec.halo_rows or 0), budget_bytes(device), spec.fixed_bytes)
        # the budget holds the whole image, so full mode was chosen or failed: the estimate was too low, and the
        # strip step takes a quarter of the image
        return rows if rows < ref.height else max(-(-ref.height // 4), 16)

    def _run_ladder(self, spec: MetricSpec, ref: ImageData, dist: ImageData,
                    downgrades: list[str]) -> tuple[Any, str]:
        steps = self.steps(spec, ref)
        if self.device.type not in spec.devices:
            downgrades.append(f"{spec.name}: runs on {', '.join(spec.devices)} only, not {self.device.type}")
        channels = int(ref.pixels.shape[1])
        self._warn_cap(spec, ref, steps[0])
        last_error: BaseException | None = None
        for i, step in enumerate(steps):
            final = i == len(steps) - 1
            failed = None if final else recorded_failure(spec.name, step, ref.height, ref.width, channels)
            if failed is not None:
                downgrades.append(f"{spec.name}: skipped {step.backend}: out of memory before on this machine at "
                                  f"{failed.get('width')}x{failed.get('height')}")
                continue
            try:
                run_fault_hook(spec.name, step)
                return self._run_step(spec, step, ref, dist), self._label(spec, step, ref)
            except Exception as exc:  # only OOM moves down the ladder
                if not is_oom(exc) or final:
                    raise
                last_error = exc
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                record_failure(spec.name, step, ref.height, ref.width, channels, reason)
                downgrades.append(f"{spec.name}: {step.backend} ran out of memory ({reason[:120]}); "
                                  f"trying {steps[i + 1].backend}")
                self._release(step)
        raise RuntimeError(f"{spec.name}: no backend could score the pair") from last_error

    @staticmethod
    def _warn_cap(spec: MetricSpec, ref: ImageData, step: Step) -> None:
        """Warn (once per metric and device type) when a memory cap the user set cannot hold a metric that has
        no strip path: it runs in full anyway and exceeds the cap, which must not go unsaid."""
        if can_strip(spec):
            return
        channels = spec.input_channels(int(ref.pixels.shape[1]))
        warn_cap_once(spec.name, spec.working_set_bytes(ref.height, ref.width, channels), torch.device(step.device),
                      ref.height, ref.width)

    @staticmethod
    def _one_strip(spec: MetricSpec, step: Step, ref: ImageData) -> bool:
        return len(plan_strips(ref.height, step.rows or ref.height, spec.halo_rows or 0)) == 1

    def _label(self, spec: MetricSpec, step: Step, ref: ImageData) -> str:
        if step.mode == "strip" and self._one_strip(spec, step, ref):
            return f"{step.device_type} full"  # one strip is the full computation
        return step.backend

    def _release(self, step: Step) -> None:
        for cache in (self._prepared, self._dist_inputs):
            for key in [k for k in cache if k[1] == step.device]:
                del cache[key]
        if step.device_type == "cuda":
            torch.cuda.empty_cache()

    def _run_step(self, spec: MetricSpec, step: Step, ref: ImageData, dist: ImageData) -> Any:
        device = torch.device(step.device)
        params = self.params[spec.name]
        if step.mode == "strip" and not self._one_strip(spec, step, ref):
            return score_strips(spec, ref.pixels.contiguous(), dist.pixels.contiguous(), data_range=ref.data_range,
                                body_rows=step.rows or 0, device=device, params=params)
        state = self._reference_state(spec, ref, device)
        y = self._dist_inputs.get((spec.kind, str(device)))
        if y is None:  # metrics of one kind on one device share the converted distorted pixels
            y = metric_input(spec, to_device(dist.pixels, device), dist.data_range, "DIST")
            self._dist_inputs[(spec.kind, str(device))] = y
        return spec.score(state, y, params, data_range=ref.data_range)

    def _reference_state(self, spec: MetricSpec, ref: ImageData, device: torch.device) -> Any:
        key = (spec.name, str(device))
        state = self._prepared.get(key)
        if state is None:
            # metrics of one kind on one device share the converted reference pixels
            shared = (f"<{spec.kind}>", str(device))
            x = self._prepared.get(shared)
            if x is None:
                pixels = to_device(ref.pixels, device)
                x = self._prepared[shared] = metric_input(spec, pixels, ref.data_range, "REF")
            state = spec.prepare(x, self.params[spec.name])
            self._prepared[key] = state
        return state
