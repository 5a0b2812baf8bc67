"""Decoded chunks of pairs as Ray moves them: numpy arrays in the object store, not pickled tensors.

The Ray engine decodes a chunk of pairs in a CPU task (:func:`decode_chunk`) and hands the result to the scoring
actor. Ray stores numpy arrays out of band in its shared-memory object store, so an actor on the same node maps the
decoder's pixels without a copy (a torch tensor would be pickled: two copies per image), and one on another node
receives them in one transfer. Each image travels in its memory order (the decoders' interleaved ``(H, W, C)``
samples: :func:`~fusedsim.engine.batch_pairs.memory_order`), a reference shared by consecutive pairs once, with the
pixel hash the decoder computed. :func:`decoded_pairs` turns a chunk back into
:class:`~fusedsim.engine.batch_pairs.DecodedPair` objects whose pixels are read-only views of those arrays (the
batch decoders' pixels are read-only too: nothing writes to an input image).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fusedsim.engine.batch_pairs import DecodedPair, PairTask, error_text, memory_order, read_distorted, read_reference

if TYPE_CHECKING:
    from fusedsim.io.images import ImageData

__all__ = ["WireChunk", "decode_chunk", "decoded_pairs"]

#: one image: (path, samples in memory order, layout "chw"/"hwc", (1, C, H, W) shape, bit depth, channels)
WireImage = tuple[str, np.ndarray, str, tuple[int, ...], int, str]


@dataclass
class WireChunk:
    """A decoded chunk: ``refs`` (image, pixel hash) once per run of pairs sharing a reference path, and per pair
    its task, the index of its reference in ``refs``, its distorted image and its error (``""`` when decoded)."""

    refs: list[tuple[WireImage | None, str]]
    pairs: list[tuple[PairTask, int, WireImage | None, str]]
    decode_s: float = 0.0  # seconds the decoder spent (the decode bound, for the run's summary)


def _to_wire(image: ImageData) -> WireImage:
    pixels, layout = memory_order(image.pixels)
    return str(image.path), pixels.numpy(), layout, tuple(image.pixels.shape), image.bit_depth, image.channels


def _from_wire(wire: WireImage) -> ImageData:
    import torch

    from fusedsim.engine.batch_pairs import from_memory_order
    from fusedsim.io.images import ImageData

    path, array, layout, shape, bit_depth, channels = wire
    with warnings.catch_warnings():  # the object store's arrays are read-only, as the decoders' pixels are
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        flat = torch.from_numpy(array)
    return ImageData(path=Path(path), pixels=from_memory_order(flat, shape, layout), bit_depth=bit_depth,
                     channels=channels)


def decode_chunk(tasks: Sequence[PairTask]) -> WireChunk:
    """Decode ``tasks`` in this process, in order: each reference once per run of consecutive pairs that name it
    (decoded and hashed), then each distorted image. A file that cannot be read becomes its pair's error (the
    reference's error first), never an exception."""
    import time

    start = time.perf_counter()
    chunk = WireChunk([], [])
    ref_path, ref_error = None, ""
    for task in tasks:
        if task.ref != ref_path:
            ref_path, ref_error = task.ref, ""
            try:
                image, key = read_reference(task.ref)
                chunk.refs.append((_to_wire(image), key))
            except Exception as exc:  # a bad reference fails its pairs, not the chunk
                ref_error = error_text(exc)
                chunk.refs.append((None, ""))
        ref_index = len(chunk.refs) - 1
        if ref_error:
            chunk.pairs.append((task, ref_index, None, ref_error))
            continue
        try:
            chunk.pairs.append((task, ref_index, _to_wire(read_distorted(task.dist)), ""))
        except Exception as exc:
            chunk.pairs.append((task, ref_index, None, error_text(exc)))
    chunk.decode_s = time.perf_counter() - start
    return chunk


def decoded_pairs(chunk: WireChunk) -> list[DecodedPair]:
    """The chunk's pairs as :class:`DecodedPair` (one reference object per run of pairs that share it, so the
    scorer prepares it once)."""
    refs: dict[int, ImageData] = {}
    out = []
    for task, ref_index, dist, error in chunk.pairs:
        if error or dist is None:
            out.append(DecodedPair(task, error=error))
            continue
        if ref_index not in refs:
            wire = chunk.refs[ref_index][0]
            assert wire is not None  # a reference that failed to decode fails its pairs above
            refs[ref_index] = _from_wire(wire)
        out.append(DecodedPair(task, ref=refs[ref_index], ref_key=chunk.refs[ref_index][1], dist=_from_wire(dist)))
    return out
