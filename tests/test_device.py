"""One device resolver for the API and the CLI: names, the one error message, missing GPUs."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.device import check_device_name, resolve_device
from fusedsim.core.backend import BackendUnavailableError


@pytest.mark.parametrize("name", ["gpu", "tpu", "mps", "cuda:", "cuda:x", "cpu:0", "", "cuda0"])
def test_bad_names_get_one_clear_message(name):
    with pytest.raises(ValueError) as exc:
        resolve_device(name)
    assert str(exc.value) == f"device must be auto, cpu or cuda[:N]; got {name!r}"


def test_names_are_normalised():
    assert check_device_name(" CUDA:1 ") == "cuda:1"
    assert resolve_device("CPU") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(TypeError, match="device must be a str or torch.device"):
        resolve_device(0)
    with pytest.raises(ValueError, match="got 'meta'"):
        resolve_device(torch.device("meta"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_a_gpu():
    for name in ("cuda", "cuda:0"):
        with pytest.raises(BackendUnavailableError, match="CUDA is not available"):
            resolve_device(name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_index_beyond_the_visible_gpus():
    n = torch.cuda.device_count()
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(BackendUnavailableError, match=f"sees only {n} CUDA device"):
        resolve_device(f"cuda:{n}")
