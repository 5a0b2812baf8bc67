"""Writing pictures as a video file with PyAV (``pip install 'fusedsim[video]'``): heat-map videos.

Frames arrive in batches of sRGB (B, 3, H, W) in [0, 1] (float) or codes (uint8), on any device. The file is
written under a temporary name beside the target and renamed when it is closed, so a failed or interrupted run
leaves no half-written video. The codec follows the extension: H.264 (``libx264``, CRF 18, 4:2:0) for
``.mp4``/``.mkv``/``.mov`` (MPEG-4 part 2 where this FFmpeg has no libx264), VP9 for ``.webm``; 4:2:0 needs even
sizes, so an odd last row or column is repeated.
"""

from __future__ import annotations

import os
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

__all__ = ["VideoWriter"]

_CODECS = {".mp4": "libx264", ".mkv": "libx264", ".mov": "libx264", ".webm": "libvpx-vp9"}


def _codec(suffix: str) -> tuple[str, dict[str, str]]:
    import av

    name = _CODECS.get(suffix.lower())
    if name is None:
        raise ValueError(f"a video path must end in {', '.join(sorted(_CODECS))}; got {suffix or 'no extension'!r}")
    if name == "libx264" and "libx264" not in av.codecs_available:
        return "mpeg4", {"qscale": "2"}
    return name, ({"crf": "18"} if name == "libx264" else {"crf": "30", "b:v": "0"})


class VideoWriter:
    """``with VideoWriter(path, fps) as out: out.write(frames)``: a video of the frames at ``fps`` frames/s."""

    def __init__(self, path: str | os.PathLike, fps: float) -> None:
        try:
            import av
        except ImportError:
            raise RuntimeError("writing a video needs PyAV: pip install 'fusedsim[video]'") from None
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"{self.path}: the folder {self.path.parent} does not exist")
        self._codec, self._options = _codec(self.path.suffix)
        self._rate = Fraction(fps).limit_denominator(1001)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.stem}-", suffix=self.path.suffix, dir=self.path.parent)
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a video like any other file, not mkstemp's owner-only mode
        self._tmp = Path(tmp)
        self._container = av.open(str(self._tmp), "w")
        self._stream = None
        self.frames = 0

    def write(self, frames: torch.Tensor) -> None:
        """Append ``frames`` (B, 3, H, W): sRGB in [0, 1] or uint8 codes."""
        import av

        if frames.dim() != 4 or frames.shape[1] != 3:
            raise ValueError(f"frames must be (B, 3, H, W); got {tuple(frames.shape)}")
        if frames.dtype != torch.uint8:
            frames = (frames.float().clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)
        h, w = frames.shape[-2:]
        pad = (0, w % 2, 0, h % 2)
        if any(pad):  # 4:2:0 takes even sizes: repeat the last column / row
            frames = torch.nn.functional.pad(frames.float(), pad, mode="replicate").to(torch.uint8)
        pixels = frames.permute(0, 2, 3, 1).contiguous().cpu().numpy()
        if self._stream is None:
            self._stream = self._container.add_stream(self._codec, rate=self._rate, options=self._options)
            self._stream.width, self._stream.height = pixels.shape[2], pixels.shape[1]
            self._stream.pix_fmt = "yuv420p"
        for picture in pixels:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(picture), format="rgb24")
            self._container.mux(self._stream.encode(frame))
            self.frames += 1

    def close(self, keep: bool = True) -> None:
        """Finish the file and move it to its path (``keep``), or remove it."""
        done = False
        try:
            if keep and self._stream is not None:
                self._container.mux(self._stream.encode())
            self._container.close()
            done = keep and self._stream is not None
        finally:
            if done:
                os.replace(self._tmp, self.path)
            else:  # nothing written, dropped, or the encoder failed: no file at all
                self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(keep=exc_type is None)
