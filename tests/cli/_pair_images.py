"""Small image pairs on disk for the CLI tests (64x48 RGB PNGs), and the expected scores from the public API."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from PIL import Image

W, H = 64, 48


def write_images(folder: Path, refs: int = 3, dists: int = 2, seed: int = 0) -> dict[str, list[str]]:
    """``r{i}.png`` and ``d{i}{j}.png`` (noisy copies) in ``folder``; returns {ref name: [dist names]}."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[str]] = {}
    for i in range(refs):
        base = rng.random((H // 4, W // 4, 3))
        a = (np.kron(base, np.ones((4, 4, 1))) * 255).astype(np.uint8)  # blocky: SSIM well below 1 after noise
        Image.fromarray(a).save(folder / f"r{i}.png")
        out[f"r{i}.png"] = []
        for j in range(dists):
            b = np.clip(a.astype(int) + rng.integers(-25 - 10 * j, 26 + 10 * j, a.shape), 0, 255).astype(np.uint8)
            Image.fromarray(b).save(folder / f"d{i}{j}.png")
            out[f"r{i}.png"].append(f"d{i}{j}.png")
    return out


def load(path: Path) -> torch.Tensor:
    return torch.from_numpy(np.asarray(Image.open(path).convert("RGB"), dtype=np.float32)).permute(2, 0, 1)[None]


def expected_ssim(ref: Path, dist: Path) -> float:
    """The one-shot public API on the same pixels (the batch path must give exactly this)."""
    import fusedsim

    return float(fusedsim.ssim(load(ref), load(dist), data_range=255))


def expected_psnr(ref: Path, dist: Path) -> float:
    """PSNR in float64 with numpy (independent of the package)."""
    a = np.asarray(Image.open(ref).convert("RGB"), dtype=np.float64)
    b = np.asarray(Image.open(dist).convert("RGB"), dtype=np.float64)
    return 10 * math.log10(255**2 / np.mean((a - b) ** 2))
