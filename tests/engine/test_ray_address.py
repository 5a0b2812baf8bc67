"""``--engine ray --address`` of a host that does not answer fails fast with the address in the message, instead
of a traceback after Ray's own 20-odd seconds of retries (issue 38)."""

from __future__ import annotations

import socket
import time

import pytest

from fusedsim.engine.ray_batch import RayBatch, check_address


def _closed_port() -> int:
    with socket.socket() as sock:  # bound then released: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("template", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "localhost:{port}"])
def test_refused_address_is_named(template):
    address = template.format(port=_closed_port())
    start = time.monotonic()
    with pytest.raises(ValueError, match="cannot reach the Ray cluster") as info:
        check_address(address, timeout_s=2.0)
    assert address in str(info.value) and time.monotonic() - start < 5


def test_unroutable_address_times_out_quickly():
    address = "192.0.2.1:6379"  # TEST-NET-1: reserved, never answers
    start = time.monotonic()
    with pytest.raises(ValueError, match="192.0.2.1:6379"):
        check_address(address, timeout_s=1.0)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("address", ["no-port", "host:notaport", "nosuchhost.invalid:6379"])
def test_malformed_or_unknown_addresses_are_named(address):
    with pytest.raises(ValueError, match="Ray") as info:
        check_address(address, timeout_s=1.0)
    assert address in str(info.value)


def test_auto_and_none_are_not_probed():
    check_address(None)
    check_address("auto")
    check_address("local")


def test_ray_batch_with_an_unreachable_address_fails_fast():
    pytest.importorskip("ray")
    address = f"127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    with pytest.raises(ValueError, match="cannot reach the Ray cluster") as info:
        RayBatch(["psnr"], ["psnr"], device="cpu", address=address)
    assert address in str(info.value) and time.monotonic() - start < 10
