"""Image files to tensors (Pillow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError


def load_image(path: str | Path, mode: str = "RGB") -> torch.Tensor:
    """Read an image file as a float32 tensor of shape (1, C, H, W) holding 0..255 values.

    ``mode`` is a Pillow mode (``RGB`` by default; ``L`` for grey). Alpha is dropped by the conversion.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image file not found: {path}")
    try:
        with Image.open(path) as img:
            img.load()
            array = np.asarray(img.convert(mode), dtype=np.float32)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"cannot read image {path}: {exc}") from exc
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))[None]
