"""Steps on side CUDA streams (``fusedsim.core.side_streams``): results read after ``gather`` are complete, inputs
made on the caller's stream stay valid while a side stream reads them, and nothing synchronises the host."""

from __future__ import annotations

import pytest
import torch

from fusedsim.core.side_streams import STREAMS, concurrent, gather

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SLEEP = 20_000_000  # GPU clock cycles: ~10 ms, far longer than the host takes to queue what follows


def test_on_the_cpu_steps_are_plain_calls():
    seen = []

    @concurrent
    def step(x):
        seen.append(x)
        return x + 1

    x = torch.arange(4.0)
    out = gather([step(x)])
    assert seen == [x] and torch.equal(out[0], x + 1) and step.__wrapped__(x).tolist() == (x + 1).tolist()


@needs_cuda
def test_results_gathered_after_slow_side_steps_are_complete():
    """Each step sleeps on the GPU before writing its result: read on the caller's stream without the wait that
    ``gather`` adds, the sums would see the buffers before the writes."""
    streams_seen = []

    @concurrent
    def slow_double(x):
        streams_seen.append(torch.cuda.current_stream())
        torch.cuda._sleep(SLEEP)
        return x * 2

    caller = torch.cuda.current_stream()
    xs = [torch.full((1 << 20,), float(i + 1), device="cuda") for i in range(3)]
    outs = gather([slow_double(x) for x in xs])
    total = torch.stack([o.sum() for o in outs])
    assert total.tolist() == [2.0 * (i + 1) * (1 << 20) for i in range(3)]
    assert caller not in streams_seen and len(set(streams_seen)) == STREAMS


@needs_cuda
def test_an_input_the_caller_frees_is_not_reused_before_the_side_step_reads_it():
    """The caller drops its input right after queuing the step and fills a same-size tensor: the caching allocator
    must not hand the input's block out before the side stream has copied it."""

    @concurrent
    def slow_copy(x):
        torch.cuda._sleep(SLEEP)
        return x.clone()

    x = torch.full((1 << 22,), 7.0, device="cuda")
    out = slow_copy(x)
    del x
    torch.full((1 << 22,), -1.0, device="cuda")  # would land in x's block
    (out,) = gather([out])
    assert out.min().item() == 7.0 and out.max().item() == 7.0


@needs_cuda
def test_no_host_synchronisation():
    step = concurrent(lambda x: x + 1)
    x = torch.ones(16, device="cuda")
    gather([step(x)])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        gather([step(x), step(x), step(x)])
    finally:
        torch.cuda.set_sync_debug_mode(0)
