"""Decoding in worker processes: the same pairs as the thread decoder, bounded look-ahead, no leftover processes."""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fusedsim.engine import decode_workers
from fusedsim.engine.batch_pairs import PairTask, decode_ahead, decoder_mode, plan
from fusedsim.engine.shared_slots import SlotArena


def _images(folder: Path) -> None:
    rng = np.random.default_rng(1)
    for i in range(3):
        ref = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        Image.fromarray(ref).save(folder / f"r{i}.png")
        for j in range(2):
            noisy = np.clip(ref.astype(int) + rng.integers(-9, 10, ref.shape), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(folder / f"d{i}{j}.png")
    grey = rng.integers(0, 65536, (20, 20), dtype=np.uint16)
    Image.fromarray(grey).save(folder / "g16.png")
    Image.fromarray((grey // 2).astype(np.uint16)).save(folder / "g16d.png")
    Image.new("RGB", (16, 16)).save(folder / "small.png")
    (folder / "broken.png").write_bytes(b"not an image")


def _table(folder: Path) -> list[PairTask]:
    rows = [("r0", "d00"), ("r0", "d01"), ("r1", "d10"), ("r0", "missing"), ("r1", "d11"), ("r2", "d20"),
            ("r2", "broken"), ("nothere", "d00"), ("broken", "d21"), ("r2", "small"), ("r2", "d21"),
            ("g16", "g16d")]
    return plan(PairTask(i, str(folder / f"{r}.png"), str(folder / f"{d}.png")) for i, (r, d) in enumerate(rows))


def _no_children() -> bool:
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not multiprocessing.active_children()


@pytest.mark.parametrize("prefetch", [4, 16])  # one job per loader item; chunks of four packed into one tensor
def test_processes_give_the_pairs_of_threads(tmp_path, prefetch):
    _images(tmp_path)
    tasks = _table(tmp_path)
    threads = list(decode_ahead(tasks, workers=2, prefetch=4, mode="threads"))
    processes = list(decode_ahead(tasks, workers=2, prefetch=prefetch, mode="processes"))
    assert [p.task for p in processes] == [p.task for p in threads] == tasks
    for t, p in zip(threads, processes):
        assert p.error == t.error and p.ref_key == t.ref_key
        if t.error:
            assert p.ref is None and p.dist is None
            continue
        for a, b in ((t.ref, p.ref), (t.dist, p.dist)):
            assert torch.equal(a.pixels, b.pixels) and a.pixels.dtype == b.pixels.dtype
            assert (a.path, a.bit_depth, a.channels) == (b.path, b.bit_depth, b.channels)
    errors = {(Path(p.task.ref).stem, Path(p.task.dist).stem): p.error for p in processes if p.error}
    assert set(errors) == {("r0", "missing"), ("r2", "broken"), ("nothere", "d00"), ("broken", "d21")}
    assert errors[("r0", "missing")].startswith("DIST: image file not found")
    assert errors[("broken", "d21")].startswith("REF: cannot read image") and "\n" not in errors[("broken", "d21")]
    small = next(p for p in processes if p.task.dist.endswith("small.png"))
    assert small.error == "" and small.dist.width == 16 and small.ref.width == 32  # the size check comes later
    assert next(p for p in processes if p.task.dist.endswith("g16d.png")).ref.bit_depth == 16
    # consecutive pairs of one reference share one decoded reference
    r0 = [p for p in processes if p.task.ref.endswith("r0.png") and not p.error]
    assert len(r0) == 2 and r0[0].ref is r0[1].ref
    assert _no_children()


def test_each_shared_reference_is_one_job():
    tasks = [PairTask(i, r, f"d{i}") for i, r in enumerate(["a", "a", "b", "a", "a"])]
    assert list(decode_workers.plan_jobs(tasks)) == [
        (True, "a"), (False, "d0"), (False, "d1"), (True, "b"), (False, "d2"), (True, "a"), (False, "d3"),
        (False, "d4")]


def test_decoding_runs_ahead_but_bounded(tmp_path, monkeypatch):
    _images(tmp_path)
    tasks = [PairTask(i, str(tmp_path / "r0.png"), str(tmp_path / "d00.png")) for i in range(40)]
    handed = []  # jobs the loader has handed to its workers
    real = decode_workers._Jobs.__iter__

    def counted(self):
        for chunk in real(self):
            handed.extend(chunk[0])  # (jobs, slot)
            yield chunk

    monkeypatch.setattr(decode_workers._Jobs, "__iter__", counted)
    stream = decode_ahead(tasks, workers=2, prefetch=4, mode="processes")
    first = next(stream)
    time.sleep(0.3)  # the consumer is busy: the workers go on, but only as far as prefetch allows
    assert first.error == "" and first.ref_key.startswith(("xx:", "b2:"))
    dists = sum(1 for is_ref, _ in handed if not is_ref)
    assert 2 <= dists <= 1 + 4  # the pair in hand and at most prefetch pairs ahead
    assert len(list(stream)) == 39
    assert len(handed) == 41  # one reference job for the 40 pairs


def _record_semaphores(monkeypatch) -> list[str]:
    """Names of the named semaphores this process creates from now on, as /dev/shm lists them. Only our own are
    checked: under pytest-xdist other workers create and free theirs in the same /dev/shm at the same time."""
    from multiprocessing import synchronize

    names: list[str] = []
    make_name = synchronize.SemLock._make_name

    def recording() -> str:
        name = make_name()
        names.append("sem." + name.lstrip("/"))
        return name

    monkeypatch.setattr(synchronize.SemLock, "_make_name", staticmethod(recording))
    return names


def test_early_stop_and_interrupt_leave_no_processes(tmp_path, monkeypatch):
    _images(tmp_path)
    tasks = [PairTask(i, str(tmp_path / "r1.png"), str(tmp_path / f"d1{i % 2}.png")) for i in range(60)]
    shm = os.path.isdir("/dev/shm")
    ours = _record_semaphores(monkeypatch)

    with closing(decode_ahead(tasks, workers=2, prefetch=8, mode="processes")) as pairs:
        assert next(pairs).error == ""
        assert len(multiprocessing.active_children()) == 2
    assert _no_children()

    with pytest.raises(KeyboardInterrupt), closing(decode_ahead(tasks, workers=2, prefetch=8, mode="processes")) as p:
        for _ in p:
            raise KeyboardInterrupt
    assert _no_children()

    dropped = decode_ahead(tasks, workers=2, prefetch=8, mode="processes")
    next(dropped)
    del dropped  # a consumer that just lets go of the iterator
    assert _no_children()
    if shm:
        # the loaders' queues hold named semaphores until the queues are collected, and the interrupted loader
        # is referenced from a traceback (a reference cycle): collect it, as the interpreter eventually would
        # (a queue's feeder thread may still hold it for a moment on a loaded machine: poll, bounded)
        assert ours  # the loaders' queues did create named semaphores: the check below sees something
        deadline = time.monotonic() + 10.0
        while True:
            gc.collect()
            left = set(ours) & set(os.listdir("/dev/shm"))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not left  # none left behind


def test_auto_mode_and_bad_arguments():
    assert decoder_mode("auto", 1) == decoder_mode("auto", 2) == "threads"
    assert decoder_mode("auto", 4) == "processes" and decoder_mode("threads", 16) == "threads"
    with pytest.raises(ValueError, match="decoder mode"):
        decoder_mode("fibers", 2)
    with pytest.raises(ValueError, match="workers and prefetch"):
        decode_ahead([], workers=0, mode="processes")
    assert list(decode_ahead([], workers=2, mode="processes")) == []


def test_packed_chunk_round_trips_pixels_dtypes_and_errors(tmp_path):
    """A chunk travels as one byte tensor: 8-bit RGB, 16-bit grey (float32 samples) and failed jobs come back as
    they were decoded, each image a view at an aligned offset."""
    _images(tmp_path)
    jobs = [(True, str(tmp_path / "r0.png")), (False, str(tmp_path / "broken.png")),
            (False, str(tmp_path / "g16.png")), (False, str(tmp_path / "d01.png"))]
    decoded = [decode_workers._decode(job) for job in jobs]
    flat, meta, slot = decode_workers._pack(decoded)
    assert flat.dtype == torch.uint8 and len(meta) == 4 and slot is None
    back = list(decode_workers._unpack((flat, meta, slot)))
    for (image, key, error), (got, got_key, got_error) in zip(decoded, back):
        assert (got_key, got_error) == (key, error)
        if image is None:
            assert got is None and "cannot read" in error
            continue
        assert got.pixels.dtype == image.pixels.dtype and torch.equal(got.pixels, image.pixels)
        assert (got.path, got.bit_depth, got.channels) == (image.path, image.bit_depth, image.channels)
        assert got.pixels.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    assert back[2][0].pixels.dtype == torch.float32 and back[0][0].pixels.dtype == torch.uint8


def _chunk(folder: Path) -> list:
    jobs = [(True, str(folder / "r0.png")), (False, str(folder / "broken.png")),
            (False, str(folder / "g16.png")), (False, str(folder / "d01.png"))]
    return [decode_workers._decode(job) for job in jobs]


def test_chunk_in_a_slot_round_trips_and_frees_the_slot_with_its_last_view(tmp_path):
    """A chunk written into an arena slot comes back as views of a lease on that slot; the slot is free again only
    when no image, derived view or array made from them is alive."""
    _images(tmp_path)
    decoded = _chunk(tmp_path)
    arena = SlotArena(2, 64 * 1024)
    slot = arena.take()
    fresh, meta, got_slot = decode_workers._pack(decoded, arena, slot)
    assert fresh is None and got_slot == slot and arena.free == 1
    back = list(decode_workers._unpack((fresh, meta, slot), arena))
    for (image, key, error), (got, got_key, got_error) in zip(decoded, back):
        assert (got_key, got_error) == (key, error)
        if image is not None:
            assert got.pixels.dtype == image.pixels.dtype and torch.equal(got.pixels, image.pixels)
    assert arena.free == 1  # the images view the slot
    kept = back[2][0].pixels.transpose(-1, -2)  # a derived view of the 16-bit image
    array = back[3][0].pixels.numpy()
    del back, got
    assert arena.free == 1
    del kept
    assert arena.free == 1
    del array
    assert arena.free == 2  # the last view gone: the slot can be filled again


def test_a_chunk_too_large_for_its_slot_comes_back_fresh_and_the_slot_is_returned(tmp_path):
    _images(tmp_path)
    decoded = _chunk(tmp_path)
    arena = SlotArena(1, 256)  # smaller than the chunk's pixels
    slot = arena.take()
    fresh, meta, got_slot = decode_workers._pack(decoded, arena, slot)
    assert fresh is not None and got_slot == slot
    back = list(decode_workers._unpack((fresh, meta, slot), arena))
    assert arena.free == 1  # given back at once: nothing views it
    assert torch.equal(back[0][0].pixels, decoded[0][0].pixels)
    failed = [decode_workers._decode((False, str(tmp_path / "broken.png")))]
    slot = arena.take()
    assert list(decode_workers._unpack(decode_workers._pack(failed, arena, slot), arena))[0][0] is None
    assert arena.free == 1  # a chunk of errors only holds no slot


def _distinct_images(folder: Path, count: int, side: int, taller: int = 0) -> list[PairTask]:
    """``count`` pairs of side×side noise PNGs; the last ``taller`` pairs one or two rows taller."""
    rng = np.random.default_rng(7)
    tasks = []
    for i in range(count):
        height = side if i < count - taller else side + 1 + i % 2
        for name in (f"r{i}", f"d{i}"):
            Image.fromarray(rng.integers(0, 256, (height, side, 3), dtype=np.uint8)).save(folder / f"{name}.png")
        tasks.append(PairTask(i, str(folder / f"r{i}.png"), str(folder / f"d{i}.png")))
    return tasks


def _same(got, want) -> bool:
    return not got.error and torch.equal(got.ref.pixels, want.ref.pixels) and torch.equal(got.dist.pixels,
                                                                                          want.dist.pixels)


def test_slots_are_reused_and_never_overwrite_an_image_still_held(tmp_path):
    """Consumed and dropped pairs come back in reused slots (views of a lease, not a fresh shared segment); pairs
    the consumer keeps are never overwritten when later chunks reuse memory (those fall back to fresh tensors
    while every slot is viewed). The last pairs are taller than the first: the slots are sized from headers
    sampled over the whole list, so they fit too."""
    tasks = _distinct_images(tmp_path, 24, 12, taller=8)
    expected = list(decode_ahead(tasks, workers=2, prefetch=4, mode="threads"))
    leased = 0
    for got, want in zip(decode_ahead(tasks, workers=2, prefetch=8, mode="processes"), expected):
        assert _same(got, want)
        leased += not got.dist.pixels.is_shared()  # a lease's storage wraps the arena; fresh segments are shared
    assert leased >= len(tasks) * 3 // 4
    held = list(decode_ahead(tasks, workers=2, prefetch=8, mode="processes"))  # every image kept
    assert all(_same(got, want) for got, want in zip(held, expected))
    fresh = list(decode_workers.decode_in_processes(tasks, workers=2, prefetch=8, reuse_memory=False))
    assert all(_same(got, want) and got.dist.pixels.is_shared() for got, want in zip(fresh, expected))
    assert _no_children()


def test_slots_fit_the_largest_sampled_image_and_larger_chunks_come_back_fresh(tmp_path):
    tasks = _distinct_images(tmp_path, 40, 10, taller=2)  # 10x10, then 11 and 12 rows in the last two pairs
    arena = decode_workers._arena(tasks, slots=3, chunk=2)
    assert arena.slot_bytes == 2 * 64 * -(-12 * 10 * 3 // 64)  # the last pair is always sampled
    small = decode_workers._arena(tasks[:30], slots=3, chunk=2)
    assert small.slot_bytes == 2 * 64 * -(-10 * 10 * 3 // 64)
    unreadable = [PairTask(0, str(tmp_path / "missing.png"), str(tmp_path / "gone.png"))]
    assert decode_workers._arena(unreadable, slots=3, chunk=2) is None
    # a chunk of the taller images in a slot sized for the smaller ones: packed fresh, the slot given back
    decoded = [decode_workers._decode((False, t.dist)) for t in tasks[-2:]]
    slot = small.take()
    fresh, _, _ = decode_workers._pack(decoded, small, slot)
    assert fresh is not None


def test_default_workers_leave_the_scoring_thread_a_core_and_stop_at_the_cap(monkeypatch):
    from fusedsim.engine import batch_pairs

    for cpus, processes, threads in ((1, 1, 1), (2, 1, 2), (16, 15, 8), (32, 31, 8), (64, 31, 8), (256, 31, 8)):
        monkeypatch.setattr(batch_pairs.os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)), raising=False)
        assert batch_pairs.default_workers("processes") == batch_pairs.default_workers("auto") == processes
        assert batch_pairs.default_workers("threads") == threads


def test_prestart_starts_the_fork_server_with_the_image_reader_preloaded():
    """``fusedsim batch`` starts the decoders' fork server while it builds the scorer: afterwards the server runs
    (the workers fork from it instead of waiting for its imports) and preloads the image reader."""
    from multiprocessing import forkserver

    from fusedsim.engine.decode_workers import prestart, start_method

    if start_method() != "forkserver":
        assert prestart() is None
        return
    thread = prestart()
    assert thread is not None
    thread.join(120)
    assert not thread.is_alive()
    server = forkserver._forkserver
    assert server._forkserver_pid is not None and server._forkserver_alive_fd is not None
    assert "fusedsim.io.images" in server._preload_modules
