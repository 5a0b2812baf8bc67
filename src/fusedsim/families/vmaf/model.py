"""VMAF models: libvmaf's JSON model format, and the prediction of a score from per-frame features.

A model maps each frame's features to a score in libvmaf's steps and order, all in double precision:

1. the feature vector in the model's ``feature_names`` order;
2. ``linear_rescale`` normalisation, ``x' = slope[i + 1]·x + intercept[i + 1]``, then, for models with a
   ``chroma_correction_parameter`` ``c`` (the v1 models), libvmaf's chroma correction: where the SpEED chroma
   feature maps back to exactly 0 it is replaced by ``c·(1 - adm3)``, normalised again, adm3 being its normalised
   value mapped back;
3. libsvm's ν-SVR with an RBF kernel: ``Σ_j coef_j·exp(-γ·Σ_i (x'_i - sv_ji)²) - ρ``, support vectors summed in
   file order and squared differences in index order (a sparse support vector's missing index is 0);
4. ``(s - intercept[0]) / slope[0]``;
5. the score transform (polynomial ``p0 + p1·y + p2·y·y``, then the rectification ``out_gte_in`` /
   ``out_lte_in``) when the model enables it or the caller asks (``enable_transform``);
6. clipping to ``score_clip`` unless ``disable_clip``.

Sums run sequentially and ``exp`` is C's (``math.exp``), so scores equal libvmaf's bit for bit given equal
features. The built-in models are copies of libvmaf's model files (``models/``, BSD+Patent licence, see
``models/README.md``). Torch-free.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusedsim.families.vmaf.feature_requests import FeatureRequest

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BUILT_IN_MODELS", "ModelRequest", "VmafModel", "feature_requests", "load_model", "load_models",
           "parse_model_option",
           "predict_from"]

_MODELS = Path(__file__).resolve().parent / "models"

DEFAULT_MODEL = "vmaf_v0.6.1"
#: Model versions shipped with the package (``--model version=<name>``): the files in ``models/``, named as
#: libvmaf 3.2.0 names them, the default first.
BUILT_IN_MODELS: dict[str, Path] = {path.stem: path for path in sorted(
    _MODELS.glob("*.json"), key=lambda path: (path.stem != DEFAULT_MODEL, path.stem))}

# libvmaf's feature extractors by the prefix of a model's feature names, and their names on the command line
_EXTRACTORS = {"VMAF_integer_feature": "integer", "VMAF_feature": "float"}
# the other extractors' model feature names: (extractor, printed name without the option suffix)
_OTHER_FEATURES = {
    "Cambi_feature_cambi_score": ("cambi", "cambi"),
    "Speed_chroma_feature_speed_chroma_u_score": ("speed_chroma", "speed_chroma_u"),
    "Speed_chroma_feature_speed_chroma_v_score": ("speed_chroma", "speed_chroma_v"),
    "Speed_chroma_feature_speed_chroma_uv_score": ("speed_chroma", "speed_chroma_uv"),
}
# libvmaf's chroma correction (predict.c): the feature guided by the correction and the one guiding it, found by
# substrings of their names
_GUIDED, _GUIDING = "speed_chroma", "adm3"
_INTEGER_FEATURES = {"adm2": "adm", "aim": "adm", "adm3": "adm", "motion2": "motion", "motion3": "motion",
                     "motion": "motion", "vif_scale0": "vif", "vif_scale1": "vif", "vif_scale2": "vif",
                     "vif_scale3": "vif"}


@dataclass(frozen=True)
class ModelFeature:
    """One input of a model: the extractor that computes it (``vif``, ``adm``, ``motion``), its options (the
    model's ``feature_opts_dicts`` entry, e.g. ``{"vif_enhn_gain_limit": 1.0}``) and its value's name in
    libvmaf's output without the option suffix (``integer_vif_scale0``)."""

    extractor: str
    options: Mapping[str, Any]
    base_name: str


@dataclass(frozen=True)
class VmafModel:
    """A parsed libvmaf model (``norm_type`` ``linear_rescale`` or ``none``, libsvm ν-SVR, RBF kernel)."""

    name: str
    version: str
    features: tuple[ModelFeature, ...]
    slopes: tuple[float, ...]
    intercepts: tuple[float, ...]
    gamma: float
    rho: float
    coefs: np.ndarray = field(repr=False)  # (S,) float64
    support_vectors: np.ndarray = field(repr=False)  # (S, F) float64, missing indices 0
    polynomial: tuple[float | None, float | None, float | None] = (None, None, None)  # p0, p1, p2
    out_gte_in: bool = False
    out_lte_in: bool = False
    transform_enabled: bool = False  # by the model file; ``enable_transform`` forces it
    clip: tuple[float, float] | None = (0.0, 100.0)
    enable_transform: bool = False
    disable_clip: bool = False
    chroma_correction: float | None = None  # the file's chroma_correction_parameter (v1 models: 120)

    def predict(self, columns: Sequence[np.ndarray]) -> np.ndarray:
        """Scores (F,) -> (N,) float64 from the model's features as per-frame columns, in ``features`` order."""
        import numpy as np

        if len(columns) != len(self.features):
            raise ValueError(f"model {self.name!r} takes {len(self.features)} features; got {len(columns)}")
        x = np.stack([np.asarray(c, dtype=np.float64) for c in columns], axis=1)  # (N, F)
        if self.slopes:  # linear_rescale
            x = np.asarray(self.slopes[1:]) * x + np.asarray(self.intercepts[1:])
        if self.chroma_correction:
            x = self._correct_chroma(x)
        scores = self._svm(x)
        if self.slopes:
            scores = (scores - self.intercepts[0]) / self.slopes[0]
        if self.transform_enabled or self.enable_transform:
            scores = np.array([self._transform(y) for y in scores], dtype=np.float64)
        if self.clip is not None and not self.disable_clip:
            lo, hi = self.clip
            scores = np.where(scores < lo, lo, scores)
            scores = np.where(scores > hi, hi, scores)
        return scores

    def _correct_chroma(self, x: np.ndarray) -> np.ndarray:
        """libvmaf's chroma correction of normalised features ``x`` (N, F): where the SpEED chroma feature maps
        back to exactly 0 (singular chroma), it becomes ``c * (1 - adm3)``, normalised again, with adm3 itself
        mapped back from its normalised value (not the computed one: the round trip can move it by an ulp)."""
        import numpy as np

        guided, guiding = _chroma_pair(self.features, self.name)

        def back(values: np.ndarray, i: int) -> np.ndarray:
            return (values - self.intercepts[i + 1]) / self.slopes[i + 1] if self.slopes else values

        c = self.chroma_correction
        corrected = -c * back(x[:, guiding], guiding) + c
        if self.slopes:
            corrected = self.slopes[guided + 1] * corrected + self.intercepts[guided + 1]
        x = x.copy()
        x[:, guided] = np.where(back(x[:, guided], guided) == 0.0, corrected, x[:, guided])
        return x

    def _svm(self, x: np.ndarray) -> np.ndarray:
        """libsvm's nu-SVR decision value of each frame, ``x`` (N, F) -> (N,), with libsvm's double arithmetic:
        squared distances to every support vector summed in feature order (elementwise, so vectorising over
        frames and vectors keeps each value's bits), the C library's ``exp`` (``math.exp``: numpy's own ``exp``
        may differ in the last bit), and the kernel terms summed sequentially in file order (``cumsum``)."""
        import numpy as np

        sv = self.support_vectors
        d = x[:, 0:1] - sv[None, :, 0]
        dist = d * d
        for i in range(1, x.shape[1]):
            d = x[:, i:i + 1] - sv[None, :, i]
            dist = dist + d * d
        neg_gamma = -self.gamma
        kernel = np.array([math.exp(neg_gamma * v) for v in dist.reshape(-1).tolist()],
                          dtype=np.float64).reshape(dist.shape)
        return np.cumsum(self.coefs * kernel, axis=1)[:, -1] - self.rho if len(x) else np.zeros(0)

    def _transform(self, y: float) -> float:
        p0, p1, p2 = self.polynomial
        out = y
        if p0 is not None or p1 is not None or p2 is not None:
            out = 0.0
            if p0 is not None:
                out += p0
            if p1 is not None:
                out += p1 * y
            if p2 is not None:
                out += p2 * y * y
        if self.out_lte_in and out > y:
            out = y
        if self.out_gte_in and out < y:
            out = y
        return out


def _flag(value: Any) -> bool:
    return value is True or value == "true"


def _parse_svm(text: str, n_features: int, where: str) -> tuple[float, float, np.ndarray, np.ndarray]:
    import numpy as np

    header: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "SV":
            body = lines[i + 1:]
            break
        key, _, value = line.partition(" ")
        header[key] = value.strip()
    else:
        raise ValueError(f"{where}: the libsvm model has no SV section")
    if header.get("svm_type") != "nu_svr" or header.get("kernel_type") != "rbf":
        raise ValueError(f"{where}: only libsvm nu_svr models with an rbf kernel are supported; got "
                         f"svm_type {header.get('svm_type')!r}, kernel_type {header.get('kernel_type')!r}")
    coefs, vectors = [], []
    for line in body:
        parts = line.split()
        if not parts:
            continue
        coefs.append(float(parts[0]))
        row = [0.0] * n_features
        for item in parts[1:]:
            index, _, value = item.partition(":")
            if not 1 <= int(index) <= n_features:
                raise ValueError(f"{where}: support vector index {index} outside 1..{n_features}")
            row[int(index) - 1] = float(value)
        vectors.append(row)
    total = int(header.get("total_sv", len(coefs)))
    if total != len(coefs):
        raise ValueError(f"{where}: total_sv says {total} support vectors; the model lists {len(coefs)}")
    return float(header["gamma"]), float(header["rho"]), np.array(coefs), np.array(vectors).reshape(-1, n_features)


def _chroma_pair(features: Sequence[ModelFeature], where: str) -> tuple[int, int]:
    """Indices of the chroma correction's guided (SpEED chroma) and guiding (adm3) features."""
    found = []
    for part in (_GUIDED, _GUIDING):
        hits = [i for i, f in enumerate(features) if part in f.base_name]
        if len(hits) != 1:
            raise ValueError(f"{where}: the chroma correction needs exactly one feature named with {part!r}; the "
                             f"model has {len(hits)}")
        found.append(hits[0])
    return found[0], found[1]


def _model_feature(name: str, options: Mapping[str, Any], where: str) -> ModelFeature:
    if name in _OTHER_FEATURES:
        extractor, base = _OTHER_FEATURES[name]
        return ModelFeature(extractor, dict(options), base)
    for prefix, kind in _EXTRACTORS.items():
        if name.startswith(prefix + "_") and name.endswith("_score"):
            short = name[len(prefix) + 1:-len("_score")]
            if kind == "integer" and short in _INTEGER_FEATURES:
                return ModelFeature(_INTEGER_FEATURES[short], dict(options), f"integer_{short}")
    raise ValueError(f"{where}: feature {name!r} is not supported (this version reads libvmaf's integer VIF, "
                     f"ADM and motion: {', '.join(sorted(_INTEGER_FEATURES))}, and "
                     f"{', '.join(sorted(_OTHER_FEATURES))})")


def _from_document(document: Mapping[str, Any], version: str, where: str) -> VmafModel:
    model = document.get("model_dict")
    if not isinstance(model, Mapping):
        raise ValueError(f"{where}: not a libvmaf JSON model (no model_dict)")
    if model.get("model_type") != "LIBSVMNUSVR":
        raise ValueError(f"{where}: model_type {model.get('model_type')!r} is not supported (LIBSVMNUSVR only)")
    names = list(model["feature_names"])
    opts = list(model.get("feature_opts_dicts") or [{}] * len(names))
    features = tuple(_model_feature(n, o, where) for n, o in zip(names, opts))
    norm = model.get("norm_type", "none")
    if norm not in ("linear_rescale", "none"):
        raise ValueError(f"{where}: norm_type {norm!r} is not supported (linear_rescale, none)")
    slopes = tuple(model["slopes"]) if norm == "linear_rescale" else ()
    intercepts = tuple(model["intercepts"]) if norm == "linear_rescale" else ()
    if slopes and (len(slopes) != len(names) + 1 or len(intercepts) != len(names) + 1):
        raise ValueError(f"{where}: slopes and intercepts need {len(names) + 1} values each")
    gamma, rho, coefs, vectors = _parse_svm(model["model"], len(names), where)
    transform = model.get("score_transform") or {}
    if "knots" in transform:
        raise ValueError(f"{where}: score transforms with knots are not supported yet")
    clip = model.get("score_clip")
    correction = model.get("chroma_correction_parameter")
    if correction is not None:
        if isinstance(correction, bool) or not isinstance(correction, (int, float)):
            raise ValueError(f"{where}: chroma_correction_parameter must be a number; got {correction!r}")
        _chroma_pair(features, where)
    return VmafModel(
        name="vmaf", version=version, features=features, slopes=slopes, intercepts=intercepts, gamma=gamma,
        rho=rho, coefs=coefs, support_vectors=vectors,
        polynomial=tuple(transform.get(p) for p in ("p0", "p1", "p2")),  # type: ignore[arg-type]
        out_gte_in=_flag(transform.get("out_gte_in")), out_lte_in=_flag(transform.get("out_lte_in")),
        transform_enabled=_flag(transform.get("enabled")),
        clip=(float(clip[0]), float(clip[1])) if clip else None,
        chroma_correction=float(correction) if correction is not None else None,
    )


def load_model(version: str | None = None, *, path: str | os.PathLike | None = None) -> VmafModel:
    """A built-in model by ``version`` (:data:`BUILT_IN_MODELS`) or a libvmaf JSON model file at ``path``."""
    if (version is None) == (path is None):
        raise ValueError("give exactly one of version (a built-in model) and path (a JSON model file)")
    if version is not None:
        if version not in BUILT_IN_MODELS:
            raise ValueError(f"unknown model version {version!r}; built-in models: {', '.join(BUILT_IN_MODELS)}")
        file, label = BUILT_IN_MODELS[version], version
    else:
        file, label = Path(path), Path(path).stem
        if file.suffix == ".pkl":
            raise ValueError(f"model {str(path)!r}: pickled (.pkl) models are not supported; use a JSON model")
    try:
        document = json.loads(Path(file).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read model file {str(file)!r}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"model file {str(file)!r} is not valid JSON: {exc}") from exc
    return _from_document(document, label, str(file))


@dataclass(frozen=True)
class ModelRequest:
    """A ``--model`` option: ``version=…`` or ``path=…``, then ``name=…``, ``enable_transform``,
    ``disable_clip`` and feature overloads ``<extractor>.<option>=<value>``, ``:``-separated as libvmaf takes
    them."""

    version: str | None = None
    path: str | None = None
    name: str = "vmaf"
    enable_transform: bool = False
    disable_clip: bool = False
    overloads: tuple[tuple[str, str, str], ...] = ()  # (extractor, option, value)

    def load(self) -> VmafModel:
        model = load_model(self.version, path=self.path)
        features = model.features
        for extractor, option, value in self.overloads:
            if not any(f.extractor == extractor for f in features):
                raise ValueError(f"--model {self.name}: the model has no {extractor!r} feature to set "
                                 f"{option!r} on (its features: "
                                 f"{', '.join(sorted({f.extractor for f in features}))})")
            features = tuple(replace(f, options={**f.options, option: value}) if f.extractor == extractor else f
                             for f in features)
        return replace(model, name=self.name, features=features, enable_transform=self.enable_transform,
                       disable_clip=self.disable_clip)


def parse_model_option(text: str) -> ModelRequest:
    """libvmaf's ``--model`` value, e.g. ``version=vmaf_v0.6.1:name=vmaf_noclip:disable_clip``."""
    fields: dict[str, Any] = {}
    overloads = []
    for part in text.split(":"):
        key, eq, value = part.partition("=")
        if not eq:
            if key not in ("disable_clip", "enable_transform"):
                raise ValueError(f"--model {text!r}: bad option {key!r} (expected key=value, disable_clip or "
                                 f"enable_transform)")
            value = "true"
        if key in ("version", "path", "name"):
            if not value:
                raise ValueError(f"--model {text!r}: {key}= needs a value")
            fields[key] = value
        elif key in ("disable_clip", "enable_transform"):
            if value not in ("true", "false"):
                raise ValueError(f"--model {text!r}: {key} takes true or false; got {value!r}")
            fields[key] = value == "true"
        elif "." in key:
            extractor, _, option = key.partition(".")
            overloads.append((extractor, option, value))
        else:
            raise ValueError(f"--model {text!r}: unknown key {key!r} (version, path, name, enable_transform, "
                             f"disable_clip, or <feature>.<option>=<value>)")
    if ("version" in fields) == ("path" in fields):
        raise ValueError(f"--model {text!r}: give exactly one of version= and path=")
    return ModelRequest(overloads=tuple(overloads), **fields)


def load_models(models: str | VmafModel | Sequence[str | VmafModel]) -> list[VmafModel]:
    """Models from built-in versions (``"vmaf_v0.6.1neg"``), libvmaf ``--model`` strings
    (``"version=vmaf_v0.6.1:disable_clip"``, ``"path=m.json"``) or loaded models; one or a sequence."""
    items = list(models) if isinstance(models, Sequence) and not isinstance(models, str) else [models]
    wrong = [item for item in items if not isinstance(item, (str, VmafModel))]
    if wrong or not items:
        raise TypeError(f"model must be a model version, a --model string, a VmafModel or a list of them; got "
                        f"{models!r}")
    return [item if isinstance(item, VmafModel)
            else parse_model_option(item if "=" in item else f"version={item}").load() for item in items]


def _request(model: VmafModel, feature: ModelFeature) -> FeatureRequest:
    """The request computing ``feature`` with the model's options; a clear error when this installation does not
    compute that extractor (e.g. ``cambi`` before its family is installed)."""
    from fusedsim.families.vmaf.feature_requests import EXTRACTOR_OPTIONS

    if feature.extractor not in EXTRACTOR_OPTIONS:
        raise ValueError(f"model {model.name!r} ({model.version}) reads libvmaf's {feature.extractor!r} feature "
                         f"({feature.base_name}), which this installation of fusedsim does not compute (features: "
                         f"{', '.join(EXTRACTOR_OPTIONS)})")
    return FeatureRequest.of(feature.extractor, feature.options)


def feature_requests(model: VmafModel) -> list[FeatureRequest]:
    """The feature extractors (with the model's options) whose outputs ``model`` reads, in the model's order."""
    return list(dict.fromkeys(_request(model, f) for f in model.features))


def predict_from(model: VmafModel, metrics: Mapping[str, np.ndarray]) -> np.ndarray:
    """``model``'s per-frame scores from computed per-frame feature columns (libvmaf names)."""
    columns = []
    for feature in model.features:
        name = feature.base_name + _request(model, feature).suffix
        if name not in metrics:
            raise ValueError(f"model {model.name!r} needs {name!r}, which was not computed")
        columns.append(metrics[name])
    return model.predict(columns)
