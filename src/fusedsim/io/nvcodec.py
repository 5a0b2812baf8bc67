"""NVIDIA's hardware decoder (NVDEC) through PyNvVideoCodec, NVIDIA's Python binding of its Video Codec SDK:
frames decoded into GPU memory, several decoder sessions per clip.

One NVDEC session decodes a 1080p H.264 stream at about 500 frames/s on an H200 whatever the host (the GPU has
seven decoder engines; a CPU decoder on 16 cores reaches ~2,000). So a clip is cut at its keyframes into runs of
pictures (a keyframe and the frames up to the next), and ``sessions`` decoders take the runs in turn, each on its
own thread and CUDA stream; the frames come out in presentation order, each run's from its session's queue. A
session starts each run at its keyframe packet and keeps the frames whose timestamps fall in the run (the
leading pictures of an open GOP, which reference the previous run, belong to that run and are dropped here).
A frame is identified by its timestamp, never by position: a frame missing or out of place is an error.

Memory: each session queues at most ``queue_frames`` decoded frames, by default 512 MiB of them (bounded whatever
the clip's length or size; a run longer than the queue lets its session run ahead only that far).

Samples are NVDEC's output as it is (NV12 for 8-bit 4:2:0, P016 for 10/12-bit: the codes in the high bits of
16-bit words, shifted back here), which equals a software decoder's (``tests/io/test_nvcodec.py``: ``==`` PyAV's
frames). Anything else (4:2:2, 4:4:4, a codec this GPU's NVDEC lacks, such as AV1 on Hopper) is refused with the
reason; nothing is decoded silently on the CPU instead.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from fusedsim.io.compressed import CompressedReader
from fusedsim.io.nvdec import NvdecFrame, native_codes

__all__ = ["nvcodec_available", "nvcodec_frames", "nvcodec_refusal", "plan_runs"]

#: decoder sessions per clip: two clips of a pair take six of a Hopper GPU's seven NVDEC engines
DEFAULT_SESSIONS = 3
#: bytes of decoded frames each session may hold ahead of the consumer (165 frames of 1080p 8-bit 4:2:0, 41 of 4K)
DEFAULT_QUEUE_BYTES = 512 << 20
#: consecutive runs are merged up to this many frames (fewer switches between runs in a session)
MIN_RUN_FRAMES = 48
_DONE = object()


def _import() -> Any:
    import PyNvVideoCodec as nvc  # noqa: N813 - the package's own name

    return nvc


def nvcodec_available() -> bool:
    """Whether PyNvVideoCodec can decode here: a CUDA GPU, the package, and an NVIDIA driver it accepts (its
    import checks the driver's video libraries and raises when they are missing)."""
    if not torch.cuda.is_available():
        return False
    try:
        _import()
    except Exception:  # noqa: BLE001 - ImportError, or its RuntimeError naming the driver's missing library
        return False
    return True


def nvcodec_refusal(reader: CompressedReader, device: torch.device | str = "cuda") -> str | None:
    """Why PyNvVideoCodec cannot decode ``reader``'s clip on ``device`` (from the stream's layout and the GPU's
    decoder capabilities, without decoding), or None when it can."""
    if not nvcodec_available():
        return "no CUDA GPU, or PyNvVideoCodec is not installed (pip install 'fusedsim[nvdec]')"
    fmt, info = reader.fmt, reader.info
    if fmt.chroma != "420":
        return f"4:{fmt.chroma[1]}:{fmt.chroma[2]} is read from NVDEC only as 4:2:0 here"
    if fmt.width % 2 or fmt.height % 2:
        return f"odd frame size {fmt.width}x{fmt.height}"
    if len(info.pts) != info.frame_count:
        return "its packets lack distinct timestamps"
    nvc = _import()
    device = torch.device(device)
    try:
        demuxer = nvc.CreateDemuxer(filename=str(reader.path))
        caps = nvc.GetDecoderCaps(gpuid=device.index or 0, codec=demuxer.GetNvCodecId(),
                                  chromaformat=demuxer.ChromaFormat(), bitdepth=demuxer.BitDepth())
    except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec's exceptions: a codec it does not know
        return str(exc).strip()
    if not caps.get("supported"):
        return f"this GPU's NVDEC does not decode {info.codec} {fmt.bit_depth}-bit {fmt.chroma}"
    if not (caps.get("width_min", 0) <= fmt.width <= caps.get("width_max", 1 << 30)
            and caps.get("height_min", 0) <= fmt.height <= caps.get("height_max", 1 << 30)):
        return (f"{fmt.width}x{fmt.height} is outside this GPU's NVDEC sizes ({caps.get('width_min')}x"
                f"{caps.get('height_min')} to {caps.get('width_max')}x{caps.get('height_max')})")
    return None


def _chunks(runs: list[tuple[int, int]], total: int, min_frames: int) -> list[tuple[int, int]]:
    """``runs`` cut at frame ``total`` and merged in order until each holds at least ``min_frames`` frames (a
    session switching runs skips packets; short runs, as in an all-intra clip, are decoded together)."""
    merged: list[tuple[int, int]] = []
    for first, end in runs:
        if first >= total:
            break
        end = min(end, total)
        if merged and merged[-1][1] - merged[-1][0] < min_frames:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((first, end))
    return merged


def plan_runs(keyframes: Sequence[int], frame_count: int) -> list[tuple[int, int]]:
    """The clip's runs ``[(first, end), ...]`` in presentation order: each starts at a keyframe's frame index
    (``keyframes``: presentation indices, increasing) and ends where the next starts; frames before the first
    keyframe (an open GOP's leading pictures) belong to no run, so a clip must start with a keyframe."""
    starts = sorted({k for k in keyframes if 0 <= k < frame_count})
    if not starts or starts[0] != 0:
        raise ValueError("the clip does not start with a keyframe: its first frames cannot be decoded on their own")
    return [(a, b) for a, b in zip(starts, [*starts[1:], frame_count])]


class _Session(threading.Thread):
    """One decoder decoding its runs (every ``sessions``-th) in order into its queue."""

    def __init__(self, reader: CompressedReader, runs: list[tuple[int, int]], device: torch.device,
                 want_chroma: bool, queue_frames: int, stop: threading.Event) -> None:
        super().__init__(name="fusedsim-nvdec", daemon=True)
        self.reader, self.runs, self.device, self.want_chroma, self.stop = reader, runs, device, want_chroma, stop
        self.out: queue.Queue = queue.Queue(maxsize=queue_frames)

    def put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            with torch.cuda.device(self.device):
                self._decode()
        except ValueError as exc:  # re-raised by the consumer
            self.put(exc)
        except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec's own exceptions (an unsupported codec...)
            self.put(ValueError(f"{self.reader.path}: NVDEC cannot decode it ({str(exc).strip()}); use "
                                "decoder='cpu'"))
        except BaseException as exc:
            self.put(exc)

    def take(self) -> Any:
        """The next item of the queue; ValueError if the thread ended without one."""
        while True:
            try:
                return self.out.get(timeout=0.5)
            except queue.Empty:
                if not self.is_alive() and self.out.empty():
                    raise ValueError(f"{self.reader.path}: an NVDEC session ended early") from None

    def _decode(self) -> None:
        nvc = _import()
        info = self.reader.info
        stream = torch.cuda.Stream(self.device)
        consumer = torch.cuda.default_stream(self.device)  # where the frames are stacked (the read-ahead thread)
        demuxer = nvc.CreateDemuxer(filename=str(self.reader.path))
        decoder = nvc.CreateDecoder(gpuid=self.device.index or 0, codec=demuxer.GetNvCodecId(), usedevicememory=True,
                                    cudastream=stream.cuda_stream)
        index_of = {pts: i for i, pts in enumerate(info.pts)}
        owner = {i: k for k, (first, end) in enumerate(self.runs) for i in range(first, end)}
        early: dict[int, tuple] = {}  # frames of this session's later runs, decoded while finishing an earlier one
        packets = iter(demuxer)
        fed = 0  # packets read from the demuxer, in decoding order
        flushed = False
        for k, (first, end) in enumerate(self.runs):
            start_packet = info.keyframe_packets[info.keyframes.index(first)]
            want = first
            while want < end:
                if want in early:
                    planes = early.pop(want)
                else:
                    packet = next(packets, None)
                    if packet is None:
                        if flushed:
                            raise ValueError(f"{self.reader.path}: NVDEC gave no frame {want} (missing or cut short)")
                        packet, flushed = nvc.PacketData(), True  # an empty packet flushes the decoder
                    else:
                        fed += 1
                        if fed - 1 < start_packet:
                            continue  # before this run's keyframe: another session's run
                        if fed - 1 == start_packet:
                            self._check_keyframe(packet, first)
                    with torch.cuda.stream(stream):
                        for frame in decoder.Decode(packet):
                            index = index_of.get(int(frame.getPTS()))
                            if index is None:
                                raise ValueError(f"{self.reader.path}: NVDEC gave a frame with timestamp "
                                                 f"{frame.getPTS()}, which no packet of the stream carries")
                            run = owner.get(index, -1)
                            if run > k or (run == k and index >= want):
                                early[index] = self._copy(frame, stream, consumer)
                            # else: a leading picture of a keyframe (it belongs to the run before), another
                            # session's frame, or one already given
                    if want not in early:
                        continue
                    planes = early.pop(want)
                if not self.put(NvdecFrame(want, info.timestamps[want], *planes)):
                    return
                want += 1
        self.put(_DONE)

    def _check_keyframe(self, packet: Any, first: int) -> None:
        """The packet where a run starts carries its keyframe's timestamp (both demuxers count packets alike)."""
        pts = getattr(packet, "pts", None)
        if pts is not None and int(pts) != self.reader.info.pts[first]:
            raise ValueError(f"{self.reader.path}: NVDEC's demuxer gave packet timestamp {pts} where frame {first}'s "
                             f"keyframe ({self.reader.info.pts[first]}) was due")

    def _copy(self, frame: Any, stream: torch.cuda.Stream, consumer: torch.cuda.Stream) -> tuple:
        planes = _planes(frame, self.reader, self.want_chroma)
        stream.synchronize()  # the planes are complete before another thread reads them
        for p in planes:
            if p is not None:
                p.record_stream(consumer)  # not reused while the consumer's kernels read it
        return planes


def _planes(frame: Any, reader: CompressedReader, want_chroma: bool) -> tuple[torch.Tensor, ...]:
    """Copies of a decoded frame's planes ``(y, u, v)`` at their native codes (u, v None unless asked for)."""
    fmt = reader.fmt
    name = str(frame.format).rsplit(".", 1)[-1]
    if name not in ("NV12", "P016"):
        raise ValueError(f"{reader.path}: NVDEC gave {name} frames; only 4:2:0 (NV12, P016) is read here: use "
                         "decoder='cpu'")
    bps = fmt.bytes_per_sample
    h, w, ch, cw = fmt.height, fmt.width, fmt.chroma_height, fmt.chroma_width
    rows = torch.from_dlpack(frame).view(torch.uint8)  # NV12 or P016 rows as bytes, whatever dtype is exported
    if tuple(rows.shape) != (h + ch, 2 * cw * bps) or 2 * cw != w:
        raise ValueError(f"{reader.path}: NVDEC gave a {tuple(rows.shape)} byte surface for a {w}x{h} clip (odd "
                         "sizes are read by decoder='cpu')")
    surface = native_codes(rows, bps, 16 - fmt.bit_depth if bps == 2 else 0)
    y = surface[:h].clone()
    if not want_chroma:
        return y, None, None
    uv = surface[h:].view(ch, cw, 2)
    return y, uv[..., 0].contiguous(), uv[..., 1].contiguous()


def nvcodec_frames(reader: CompressedReader, planes: Sequence[str] = ("y", "u", "v"), *,
                   device: torch.device | str = "cuda", limit: int | None = None, sessions: int = DEFAULT_SESSIONS,
                   queue_frames: int | None = None) -> Iterator[NvdecFrame]:
    """Decode ``reader``'s clip with NVDEC on ``device``, ``sessions`` decoders at once, frames in presentation
    order (the first ``limit`` when given); ``planes`` as :meth:`CompressedReader.frames`. Each session holds at
    most ``queue_frames`` decoded frames (default: :data:`DEFAULT_QUEUE_BYTES` worth, at least 8)."""
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1:
        raise ValueError(f"sessions must be a positive integer; got {sessions!r}")
    if queue_frames is None:
        fmt = reader.fmt
        frame_bytes = (fmt.height * fmt.width + 2 * fmt.chroma_height * fmt.chroma_width) * fmt.bytes_per_sample
        queue_frames = max(8, DEFAULT_QUEUE_BYTES // frame_bytes)
    elif isinstance(queue_frames, bool) or not isinstance(queue_frames, int) or queue_frames < 1:
        raise ValueError(f"queue_frames must be a positive integer; got {queue_frames!r}")
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"NVDEC decodes into GPU memory; device is {device}")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    total = reader.frame_count if limit is None else min(limit, reader.frame_count)
    if total <= 0:
        return
    info = reader.info
    if len(info.pts) != info.frame_count or len(set(info.pts)) != len(info.pts):
        raise ValueError(f"{reader.path}: its packets lack distinct timestamps, which NVDEC's frames are matched "
                         "by; use decoder='cpu'")
    try:
        runs = _chunks(plan_runs(info.keyframes, info.frame_count), total, MIN_RUN_FRAMES)
    except ValueError as exc:
        raise ValueError(f"{reader.path}: {exc}; use decoder='cpu'") from None
    n = min(sessions, len(runs))
    if n == 1:
        runs = [(0, total)]
    want_chroma = any(p in planes for p in ("u", "v"))
    stop = threading.Event()
    workers = [_Session(reader, runs[s::n], device, want_chroma, queue_frames, stop) for s in range(n)]
    for w in workers:
        w.start()
    try:
        for k, (first, end) in enumerate(runs):
            worker = workers[k % n]
            for _ in range(first, end):
                item = worker.take()
                if isinstance(item, BaseException):
                    raise item
                if item is _DONE:
                    raise ValueError(f"{reader.path}: NVDEC stopped before frame {first}")
                yield item
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=5)
