"""The scoring engine: one :class:`Scorer` for any set of registered metrics, with memory modes (full / strip),
a cached reference, an OOM fallback ladder and a benchmark-driven backend chooser.

It knows no metric by name: everything comes from :class:`fusedsim.metrics.registry.MetricSpec`. Attributes load
on first use, so importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusedsim.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from fusedsim.engine.chooser import Candidate, Choice, Task, choose
    from fusedsim.engine.memory import MemoryMode, parse_memory
    from fusedsim.engine.scorer import Scorer, ScoreResult
    from fusedsim.engine.video import VideoScores, score_video

_LAZY = {
    "Scorer": "fusedsim.engine.scorer",
    "ScoreResult": "fusedsim.engine.scorer",
    "MemoryMode": "fusedsim.engine.memory",
    "parse_memory": "fusedsim.engine.memory",
    "Task": "fusedsim.engine.chooser",
    "Candidate": "fusedsim.engine.chooser",
    "Choice": "fusedsim.engine.chooser",
    "choose": "fusedsim.engine.chooser",
    "score_video": "fusedsim.engine.video",
    "VideoScores": "fusedsim.engine.video",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
