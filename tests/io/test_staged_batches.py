"""Decoded frames stacked on the decoding thread (fusedsim.io.staged_batches): batch contents, and the staging
ring's rule that a slot is refilled only after its copy to the device has finished."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from fusedsim.io.staged_batches import RingClosed, StagingRing, stacked_batches, upload


def _frames(count: int, luma_only: bool = False, padded: bool = True):
    """(y, u, v) numpy frames; ``padded``: strided views into wider rows, as the decoder's buffers are."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        y = rng.integers(0, 256, (6, 10 if padded else 8), dtype=np.uint8)[:, :8]
        u = rng.integers(0, 256, (3, 4), dtype=np.uint8)
        v = rng.integers(0, 256, (3, 4), dtype=np.uint8)
        out.append((y, None, None) if luma_only else (y, u, v))
    return out


class _Event:
    """Stands in for a CUDA event: records whether the ring waited for it."""

    def __init__(self) -> None:
        self.waited = False

    def synchronize(self) -> None:
        self.waited = True


@pytest.mark.parametrize("ring", [None, StagingRing(3, pin=False)])
def test_batches_hold_the_frames_in_order(ring: StagingRing | None) -> None:
    frames = _frames(7)
    got = []
    for batch in stacked_batches(iter(frames), [3, 3, 1], ring):
        planes = [p.clone() for p in batch.planes]  # a ring slot is refilled later: keep a copy
        got.append(planes)
        if ring is not None:
            ring.give_back(batch.slot, _Event())
    assert [g[0].shape[0] for g in got] == [3, 3, 1]
    for k in range(3):
        expected = np.stack([f[k] for f in frames])
        assert torch.equal(torch.cat([g[k] for g in got]), torch.from_numpy(expected))


def test_luma_only_frames_have_no_chroma_planes() -> None:
    (batch,) = stacked_batches(iter(_frames(2, luma_only=True)), [2], StagingRing(2, pin=False))
    assert batch.planes[1] is None and batch.planes[2] is None and batch.planes[0].shape == (2, 6, 8)


def test_a_clip_ending_inside_a_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="ended"):
        list(stacked_batches(iter(_frames(2)), [3], None))


def test_a_slot_is_refilled_only_after_its_event() -> None:
    ring = StagingRing(2, pin=False)
    batches = stacked_batches(iter(_frames(6)), [2, 2, 2], ring)
    first = next(batches)
    snapshot = first.planes[0].clone()
    second = next(batches)
    assert second.slot != first.slot
    event = _Event()
    ring.give_back(first.slot, event)
    third = next(batches)  # the only free slot is the first one: taken after waiting for its event
    assert third.slot == first.slot and event.waited
    assert not torch.equal(third.planes[0], snapshot)  # refilled with frames 4-5 only now


def test_take_waits_for_a_free_slot_and_close_releases_it() -> None:
    ring = StagingRing(2, pin=False)
    ring.take([(1, 2, 2)], torch.uint8)
    ring.take([(1, 2, 2)], torch.uint8)
    outcome: list[object] = []

    def third() -> None:
        try:
            outcome.append(ring.take([(1, 2, 2)], torch.uint8))
        except RingClosed as exc:
            outcome.append(exc)

    worker = threading.Thread(target=third)
    worker.start()
    worker.join(0.3)
    assert worker.is_alive() and not outcome  # both slots are in use: it waits
    ring.close()
    worker.join(2.0)
    assert not worker.is_alive() and isinstance(outcome[0], RingClosed)


def test_upload_to_the_cpu_keeps_the_values() -> None:
    (batch,) = stacked_batches(iter(_frames(2)), [2], None)
    planes = upload(batch, torch.device("cpu"), None)
    assert all(torch.equal(a, b) for a, b in zip(planes, batch.planes))


@pytest.mark.parametrize("slots", [1, 0, 2.0, True])
def test_ring_size_is_checked(slots) -> None:
    with pytest.raises(ValueError, match="slots"):
        StagingRing(slots)


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_pinned_slots_reach_the_gpu_intact(device: str) -> None:
    """Slots are refilled while earlier copies may still be queued: each waits for the event recorded on the
    stream its copy went to (on a GPU that is not the current one too)."""
    if torch.cuda.device_count() < (2 if device == "cuda:1" else 1):
        pytest.skip(f"needs {device}")
    frames = _frames(64)
    ring = StagingRing(3)
    out = [upload(b, torch.device(device), ring)[0] for b in stacked_batches(iter(frames), [8] * 8, ring)]
    torch.cuda.synchronize(device)
    assert torch.equal(torch.cat(out).cpu(), torch.from_numpy(np.stack([f[0] for f in frames])))
