"""The CLI's JSON convention: strictly valid JSON, with non-finite numbers (NaN, +-Infinity) written as null."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps"]


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def dumps(payload: Any) -> str:
    """``payload`` as indented JSON; NaN and infinities become null (``json.loads`` reads every output back)."""
    return json.dumps(_finite_or_none(payload), indent=2, allow_nan=False)
