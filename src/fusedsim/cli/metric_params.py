"""``--param METRIC.NAME=VALUE`` of ``score``, ``compare``, ``batch`` and ``sweep``: a metric's keyword parameter on
the command line (``--param butteraugli.intensity_target=250``, ``--param cvvdp.display=standard_fhd``).

The names are the metric's declared parameters (:attr:`MetricSpec.params`, ``fusedsim list-metrics --format json``
shows them with their defaults); a value is read as the type of its default (number, whole number, true/false or
text). Parsing reads only the torch-free registry; the metric's own check of the values runs when the engine is
built (:meth:`MetricSpec.check_params`), before any image is read.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

from fusedsim.metrics.registry import MetricSpec, get_metric

__all__ = ["PARAM_HELP", "chosen_params", "parse_param"]

PARAM_HELP = ("a metric parameter, repeatable: --param butteraugli.intensity_target=250, --param "
              "cvvdp.display=standard_fhd (names and defaults: fusedsim list-metrics --format json)")

_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def _typed(spec: MetricSpec, name: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default``."""
    option = f"--param {spec.name}.{name}={text}"
    if isinstance(default, bool):
        if text.lower() not in _TRUE + _FALSE:
            raise argparse.ArgumentTypeError(f"{option}: expected true or false")
        return text.lower() in _TRUE
    for kind, what in ((int, "a whole number"), (float, "a number")):
        if isinstance(default, kind):
            try:
                return kind(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{option}: expected {what} (the default is {default!r})") from None
    return text


def parse_param(text: str) -> tuple[str, str, Any]:
    """argparse type of ``--param``: ``METRIC.NAME=VALUE`` as (metric registry name, parameter, typed value);
    an unknown metric or parameter is refused, naming the known ones."""
    key, eq, value = text.partition("=")
    metric, dot, name = key.strip().rpartition(".")
    if not (eq and dot and metric and name):
        raise argparse.ArgumentTypeError(f"expected METRIC.NAME=VALUE (e.g. butteraugli.intensity_target=250); "
                                         f"got {text!r}")
    try:
        spec = get_metric(metric)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    defaults = dict(spec.params)
    if name not in defaults:
        known = f"known parameters: {', '.join(defaults)}" if defaults else f"{spec.name} takes no parameters"
        raise argparse.ArgumentTypeError(f"{spec.name} has no parameter {name!r}; {known}")
    return spec.name, name, _typed(spec, name, value.strip(), defaults[name])


def chosen_params(given: Iterable[tuple[str, str, Any]] | None, metrics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--param`` values grouped by metric, for ``Scorer(params=...)``, checked by each metric (imports it). A
    parameter of a metric that is not computed is refused (it would be ignored), and so is one given twice with
    different values."""
    out: dict[str, dict[str, Any]] = {}
    for metric, name, value in given or ():
        if metric not in metrics:
            raise ValueError(f"--param {metric}.{name}: {metric} is not among the metrics computed "
                             f"({', '.join(metrics)}); add --metric {metric}")
        previous = out.setdefault(metric, {}).setdefault(name, value)
        if previous != value:
            raise ValueError(f"--param {metric}.{name} is given twice ({previous!r} and {value!r})")
    for metric, values in out.items():
        try:
            get_metric(metric).check_params(values)
            if metric == "cvvdp":
                _check_cvvdp_file_input(values.get("display", "standard_4k"))
        except (ValueError, TypeError) as exc:
            shown = " ".join(f"--param {metric}.{k}={v}" for k, v in values.items())
            raise ValueError(f"{shown}: {exc}") from None
    return out


def _check_cvvdp_file_input(display: str) -> None:
    """Files decode to display-encoded values in [0, 1] (16-bit images and deeper-than-8-bit video as floats), which
    sRGB, PQ and HLG displays take; a linear display takes absolute cd/m², which no decoder gives."""
    from fusedsim.families.cvvdp.data import display_eotf

    if display_eotf(display) == "linear":
        raise ValueError(f"cvvdp display {display!r} takes absolute linear light in cd/m², but images and videos "
                         "decode to display-encoded values in [0, 1]; use a PQ or HLG display for HDR files (16-bit "
                         "images, 10-bit video) or score linear tensors with fusedsim.cvvdp in Python")
