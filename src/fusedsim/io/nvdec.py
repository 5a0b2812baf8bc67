"""NVIDIA's hardware decoder (NVDEC) through FFmpeg's CUDA hwaccel in PyAV: frames decoded into GPU memory.

PyAV's wheels carry FFmpeg with the CUDA hwaccel (``av.codec.hwaccel.hwdevices_available()`` lists ``cuda``),
so no other package is needed: the clip is demuxed and parsed by the same FFmpeg as the CPU path, the frames
come out in the same order, and with ``is_hw_owned`` they stay on the GPU, exported by DLPack. FFmpeg is asked to
use the CUDA primary context, the one PyTorch uses. NVDEC writes 4:2:0 as two planes (luma, then Cb/Cr
interleaved: ``nv12``, ``p010le``, ``p016le``) and samples above 8 bits in the high bits of 16-bit words; the
planes are split and shifted back to their native codes on the GPU (PyAV exports only these layouts: 4:4:4 and
4:2:2 clips decode on the CPU), so a frame equals its software decode
(``tests/io/test_nvdec.py`` checks ``==`` on fixture clips). No software fallback: a stream NVDEC cannot decode
is an error, never silently decoded on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from fusedsim.io.compressed import CompressedReader, import_av

__all__ = ["NvdecFrame", "native_codes", "nvdec_available", "nvdec_frames", "nvdec_refusal"]


#: NVDEC's output layouts that PyAV exports by DLPack (two planes: luma, then Cb/Cr interleaved)
_EXPORTED = ("nv12", "p010le", "p016le")


def nvdec_available() -> bool:
    """Whether NVDEC can be used here: a CUDA GPU, PyAV with frames kept on the device (``sw_format``, PyAV 16+)
    and FFmpeg's CUDA hwaccel in it."""
    if not torch.cuda.is_available():
        return False
    try:
        av = import_av()
        from av.codec.hwaccel import hwdevices_available
    except ImportError:
        return False
    return hasattr(av.VideoFrame, "sw_format") and "cuda" in hwdevices_available()


def nvdec_refusal(reader: CompressedReader, device: torch.device | str = "cuda") -> str | None:
    """Why NVDEC cannot decode ``reader``'s clip on ``device`` (its first frame is decoded to find out: the GPU's
    decoder supports some codecs, bit depths and chroma layouts only), or None when it can."""
    if not nvdec_available():
        return "no CUDA GPU, or PyAV without FFmpeg's CUDA hwaccel"
    try:
        for _ in nvdec_frames(reader, ("y",), device=device, limit=1):
            pass
    except (ValueError, RuntimeError, OSError) as exc:
        return str(exc)
    return None


class NvdecFrame:
    """One frame decoded on the GPU: ``index``, ``time`` (seconds or None) and planes ``y`` ``(H, W)``,
    ``u``/``v`` ``(Hc, Wc)`` (None when not asked for) as CUDA uint8/uint16 tensors of native codes."""

    __slots__ = ("index", "time", "y", "u", "v")

    def __init__(self, index: int, time: float | None, y: torch.Tensor, u: torch.Tensor | None,
                 v: torch.Tensor | None) -> None:
        self.index, self.time, self.y, self.u, self.v = index, time, y, u, v


def _rows(plane: Any, height: int, row_bytes: int) -> torch.Tensor:
    """A plane's bytes ``(height, row_bytes)`` (its pitch padding dropped), a new contiguous CUDA tensor."""
    # PyAV exports CUDA planes without stream hand-off (it refuses a stream argument, which torch.from_dlpack would
    # pass): FFmpeg's CUDA hwaccel copies each frame on the context's legacy default stream, which is also torch's
    # default stream, so the copy below is ordered after it
    t = torch.from_dlpack(plane.__dlpack__())
    if t.dim() == 1:
        t = t.reshape(height, -1)
    elif t.dim() == 3:  # interleaved chroma exported as (h, w, 2)
        t = t.flatten(1)
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)  # rows are contiguous in memory: a byte view of each row
    return t[:, :row_bytes].clone(memory_format=torch.contiguous_format)  # a copy: the decoder reuses its surfaces


def native_codes(rows: torch.Tensor, bytes_per_sample: int, shift: int) -> torch.Tensor:
    """NVDEC's byte rows ``(h, row_bytes)`` uint8 as samples: the bytes themselves (8-bit), or uint16 words shifted
    right by ``shift`` (NVDEC puts 10/12-bit codes in the high bits)."""
    if bytes_per_sample == 1:
        return rows
    words = rows.view(torch.int16)  # torch lacks right shifts on uint16: shift the int16 view logically
    if shift:
        words = torch.bitwise_right_shift(words.to(torch.int32) & 0xFFFF, shift).to(torch.int16)
    return words.view(torch.uint16)


def nvdec_frames(reader: CompressedReader, planes: Sequence[str] = ("y", "u", "v"), *,
                 device: torch.device | str = "cuda", limit: int | None = None) -> Iterator[NvdecFrame]:
    """Decode ``reader``'s clip with NVDEC on ``device``; ``planes`` as :meth:`CompressedReader.frames`."""
    av = import_av()
    from av.codec.hwaccel import HWAccel

    device = torch.device(device)
    index_str = str(device.index if device.index is not None else torch.cuda.current_device())
    fmt = reader.fmt
    bps = fmt.bytes_per_sample
    want_chroma = any(p in planes for p in ("u", "v"))
    hwaccel = HWAccel("cuda", device=index_str, allow_software_fallback=False, is_hw_owned=True,
                      options={"primary_ctx": "1"})
    try:
        container = av.open(str(reader.path), metadata_errors="ignore", hwaccel=hwaccel)
    except (av.error.FFmpegError, RuntimeError) as exc:  # RuntimeError: "no stream is compatible" (seen for AV1)
        raise ValueError(f"{reader.path}: NVDEC cannot open it ({exc}); use decoder='cpu'") from None
    index = 0
    try:
        stream = container.streams.video[0]
        try:
            decoded = container.decode(stream)
            for frame in decoded:
                if limit is not None and index >= limit:
                    return
                if frame.format.name != "cuda":
                    raise ValueError(f"{reader.path}: NVDEC did not decode frame {index} (got a {frame.format.name} "
                                     "frame: the GPU's decoder does not support this stream); use decoder='cpu'")
                sw = frame.sw_format.name if frame.sw_format is not None else "?"
                if sw not in _EXPORTED:
                    raise ValueError(f"{reader.path}: NVDEC gave {sw} frames, which PyAV exports to torch only as "
                                     f"{', '.join(_EXPORTED)}; use decoder='cpu'")
                shift = 16 - fmt.bit_depth if bps == 2 else 0
                with torch.cuda.device(device):
                    y = native_codes(_rows(frame.planes[0], fmt.height, fmt.width * bps), bps, shift)
                    u = v = None
                    if want_chroma:
                        u, v = _chroma(frame, sw, fmt, bps, shift, reader)
                time = float(frame.time) if frame.time is not None else None
                yield NvdecFrame(index, time, y.view(fmt.height, fmt.width), u, v)
                index += 1
        except av.error.FFmpegError as exc:
            raise ValueError(f"{reader.path}: NVDEC decoding failed at frame {index} ({exc})") from None
    finally:
        container.close()
    if limit is None and index < reader.frame_count:
        raise ValueError(f"{reader.path}: NVDEC decoded {index} frames but the stream holds {reader.frame_count}")


def _chroma(frame: Any, sw: str, fmt: Any, bps: int, shift: int, reader: CompressedReader) -> tuple[torch.Tensor, ...]:
    ch, cw = fmt.chroma_height, fmt.chroma_width
    if len(frame.planes) != 2:
        raise ValueError(f"{reader.path}: NVDEC gave an unexpected layout {sw} with {len(frame.planes)} planes")
    uv = native_codes(_rows(frame.planes[1], ch, 2 * cw * bps), bps, shift).view(ch, cw, 2)
    return uv[..., 0].contiguous(), uv[..., 1].contiguous()
