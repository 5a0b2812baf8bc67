"""The public SSIM functions on the Triton side against the PyTorch twin: 16-bit inputs, loop variants, the fused
L1+SSIM loss against its unfused composition, MS-SSIM; and, on a GPU, what the host path promises: no device
synchronisation, the current stream, CUDA-graph capture and ``torch.compile(mode="reduce-overhead")``.

(Every registered op is also checked against its twin, gradients included, by ``test_registry.py``.)
Runs on the GPU when there is one, else on the CPU through Triton's interpreter (small sizes).
"""

from __future__ import annotations

import pytest
import torch

import fusedsim

# float32 against a float64 twin: ~1e-7 relative per statistic, up to ~1e-5 on SSIM and ~1e-4 on gradients in
# flat regions where sigma² = E[x²] - mu² cancels. Gradients of 16-bit inputs are returned in that dtype, so
# they carry its rounding (2**-11 for float16, 2**-8 for bfloat16, relative) on top.
TOL = {torch.float64: (1e-9, 1e-8), torch.float32: (2e-5, 2e-4), torch.float16: (2e-5, 1e-3),
       torch.bfloat16: (2e-5, 8e-3)}


def _pair(shape, device, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64)
    y = (x + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)).clamp(0, 1)
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


def _run(fn, backend, x, y, cotangent_seed=1):
    xr, yr = x.detach().clone().requires_grad_(True), y.detach().clone().requires_grad_(True)
    with fusedsim.use_backend(backend):
        out = fn(xr, yr)
    gen = torch.Generator().manual_seed(cotangent_seed)
    cot = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
    return out.detach(), torch.autograd.grad(out, (xr, yr), cot)


def _compare(fn, x, y, dtype=torch.float64, reference=None):
    """Kernel on (x, y) in ``dtype`` against ``reference`` (default: the same function on the twin) in float64."""
    got, got_g = _run(fn, "triton", x.to(dtype), y.to(dtype))
    ref, ref_g = _run(reference or fn, "reference", x.double().cpu(), y.double().cpu())
    val_tol, grad_tol = TOL[dtype]
    torch.testing.assert_close(got.double().cpu(), ref, atol=val_tol, rtol=val_tol)
    for g, r in zip(got_g, ref_g):
        assert g.shape == r.shape and g.dtype == dtype
        err = ((g.double().cpu() - r).norm() / r.norm().clamp_min(1e-30)).item()
        assert err < grad_tol, err


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_inputs_accumulate_in_float32(kernel_device, dtype):
    x, y = _pair((1, 2, 16, 19), kernel_device, seed=6)
    x, y = x.to(dtype).double(), y.to(dtype).double()  # values representable in `dtype`
    _compare(lambda a, b: fusedsim.ssim(a, b, data_range=1.0, win_size=5, reduction="channel"), x, y, dtype=dtype)
    _compare(lambda a, b: fusedsim.l1_ssim_loss(a, b, window_size=5), x, y, dtype=dtype)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("reduction", ["mean", "image"])
def test_fused_l1_ssim_equals_the_unfused_composition(kernel_device, padding, reduction):
    x, y = _pair((2, 3, 19, 23), kernel_device, seed=3)

    def fused(a, b):
        return fusedsim.l1_ssim_loss(a, b, 0.3, window_size=7, padding=padding, reduction=reduction)

    def composed(a, b):
        ssim = fusedsim.fused_ssim(a, b, padding=padding, window_size=7, reduction=reduction)
        l1 = (a - b).abs().flatten(1).mean(1)
        return 0.7 * (l1.mean() if reduction == "mean" else l1) + 0.3 * (1 - ssim)

    _compare(fused, x, y, reference=composed)


def test_ms_ssim_kernels_match_twin(kernel_device):
    x, y = _pair((2, 2, 21, 23), kernel_device, seed=8)
    _compare(lambda a, b: fusedsim.ms_ssim(a, b, data_range=1.0, win_size=3, weights=[0.3, 0.3, 0.4],
                                           size_average=False), x, y)


@pytest.mark.parametrize("valid", [False, True])
@pytest.mark.parametrize(("unroll", "height"), [(True, 15), (False, 15), (True, 9)])
def test_loop_variants_agree(kernel_device, unroll, valid, height):
    from fusedsim.ssim.kernels import SSIMPlan
    from fusedsim.core.moments.twin import gaussian_window
    from fusedsim.ssim.twin import ssim_reduce_ref

    x, y = _pair((1, 2, height, 40), kernel_device, seed=11)
    win = gaussian_window(7, 1.5, device=kernel_device).expand(2, -1).contiguous()
    # two row segments (the last of 7 rows, or of 1 in `same` mode at height 9: the first segment's sum then covers
    # every row) and, in valid mode, two column strips: the fused L1 term's ownership of rows and columns
    plan = SSIMPlan(x.shape, x.stride(), y.stride(), x.dtype, x.device, 7, 1e-4, 9e-4, valid, True, 3, 0.2,
                    fwd_unroll=unroll, bwd_unroll=unroll, fwd_tile=(16, 8, 1), bwd_tile=(32, 8, 1))
    got, _ = plan.forward(x, y, win)
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    ref = ssim_reduce_ref(xr, yr, win, 1e-4, 9e-4, valid, True, 3, 0.2)
    torch.testing.assert_close(got, ref.detach(), atol=1e-9, rtol=1e-9)
    g = torch.randn(ref.shape, dtype=torch.float64, device=kernel_device)
    dx, dy, _ = plan.backward((x, y, win), (), g, (True, True))
    rx, ry = torch.autograd.grad(ref, (xr, yr), g)
    torch.testing.assert_close(dx, rx, atol=1e-9, rtol=1e-8)
    torch.testing.assert_close(dy, ry, atol=1e-9, rtol=1e-8)


@pytest.mark.parametrize("tile", [(16, 8, 1), (32, 8, 1)], ids=["shifted-loads", "lane-shifts"])
@pytest.mark.parametrize(("needs", "valid"), [((True, False), False), ((False, True), True), ((True, True), False)])
def test_saved_gradient_maps_backward(kernel_device, needs, valid, tile):
    """Training calls save the unit gradient maps in the forward and filter them in the backward; the gradients
    equal the twin's (and the recomputing backward's) for every set of inputs asked for, both paddings, the fused
    L1 term, a per-plane upstream gradient and an asymmetric window (the adjoint flips it). A 16-column tile takes
    the W taps by shifted loads, a 32-column one by warp shuffles across two column strips."""
    from fusedsim.ssim.kernels import SSIMPlan
    from fusedsim.ssim.twin import ssim_reduce_ref

    x, y = _pair((2, 1, 13, 45), kernel_device, seed=21)
    win = torch.rand(1, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(kernel_device)
    win = win / win.sum(-1, keepdim=True)
    plan = SSIMPlan(x.shape, x.stride(), y.stride(), x.dtype, x.device, 5, 1e-4, 9e-4, valid, False, 3, 0.3,
                    bwd_tile=tile)
    out, saved = plan.forward_for_grad(needs, x, y, win)
    assert len(saved) == 1 and saved[0].shape[0] == 2 + sum(needs)  # bm, cm and one map per gradient
    xr, yr = x.detach().clone().requires_grad_(needs[0]), y.detach().clone().requires_grad_(needs[1])
    ref = ssim_reduce_ref(xr, yr, win, 1e-4, 9e-4, valid, False, 3, 0.3)
    torch.testing.assert_close(out, ref.detach(), atol=1e-9, rtol=1e-9)
    g = torch.randn(ref.shape, dtype=torch.float64, device=kernel_device)
    got = plan.backward((x, y, win), saved, g, needs)[:2]
    recomputed = plan.backward((x, y, win), (), g, needs)[:2]
    want = torch.autograd.grad(ref, [t for t, n in zip((xr, yr), needs) if n], g)
    for grad, again, expected in zip([d for d in got if d is not None], [d for d in recomputed if d is not None],
                                     want):
        torch.testing.assert_close(grad, expected, atol=1e-9, rtol=1e-8)
        torch.testing.assert_close(grad, again, atol=1e-12, rtol=1e-10)
    assert [d is not None for d in got] == list(needs)


def test_any_rows_per_program(kernel_device):
    """Rows per program are a launch argument (chosen per shape, ``ops/waves.py``): segments of 5 and 7 rows
    split 17 rows unevenly (a last segment of 2 and 3 rows), and the forward, the saving forward, the saved-maps
    and the recomputing backward all equal the twin. On a GPU both row counts run one compiled kernel each."""
    from fusedsim.ssim.kernels import SSIMPlan, _kernel, _saved_backward_kernel
    from fusedsim.core.moments.twin import gaussian_window
    from fusedsim.ssim.twin import ssim_reduce_ref

    x, y = _pair((1, 2, 17, 21), kernel_device, seed=13)
    win = gaussian_window(5, 1.5, device=kernel_device).expand(2, -1).contiguous()
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    ref = ssim_reduce_ref(xr, yr, win, 1e-4, 9e-4, False, True, 1, 0.2)
    want = torch.autograd.grad(ref, xr)[0]
    g = torch.ones((), dtype=torch.float64, device=kernel_device)
    compiled = []
    for rows in (5, 7):
        plan = SSIMPlan(x.shape, x.stride(), y.stride(), x.dtype, x.device, 5, 1e-4, 9e-4, False, True, 1, 0.2,
                        fwd_tile=(16, rows, 1), bwd_tile=(16, rows, 1))
        torch.testing.assert_close(plan.forward(x, y, win)[0], ref.detach(), atol=1e-9, rtol=1e-9)
        out, saved = plan.forward_for_grad((True, False), x, y, win)
        torch.testing.assert_close(out, ref.detach(), atol=1e-9, rtol=1e-9)
        torch.testing.assert_close(plan.backward((x, y, win), saved, g, (True, False))[0], want, atol=1e-9,
                                   rtol=1e-8)
        torch.testing.assert_close(plan.backward((x, y, win), (), g, (True, False))[0], want, atol=1e-9, rtol=1e-8)
        if kernel_device == "cuda":
            kernels = (_kernel("fwd", 5, False, True), _saved_backward_kernel(5, ("bm", "cm", "ax"), False, False))
            compiled.append([sum(len(entry[0]) for entry in k.device_caches.values()) for k in kernels])
    if compiled:
        assert compiled[0] == compiled[1]


def test_expanded_upstream_gradient(kernel_device):
    """A per-image result summed by the caller hands the kernel a stride-0 gradient: read it in place."""
    x, y = _pair((3, 2, 14, 15), kernel_device, seed=13)
    _compare(lambda a, b: fusedsim.fused_ssim(a, b, window_size=5, reduction="image").sum().expand(3), x, y)


# ----------------------------------------------------------------------------------------- GPU host path
def _gpu(kernel_device):
    if kernel_device.type != "cuda":
        pytest.skip("needs a GPU")


PUBLIC_CALLS = {
    "fused_ssim": lambda a, b: fusedsim.fused_ssim(a, b),
    "fused_ssim_valid": lambda a, b: fusedsim.fused_ssim(a, b, padding="valid", reduction="image").sum(),
    "ssim": lambda a, b: fusedsim.ssim(a, b, data_range=1.0),
    "ms_ssim": lambda a, b: fusedsim.ms_ssim(a, b, data_range=1.0),
    "l1_ssim_loss": lambda a, b: fusedsim.l1_ssim_loss(a, b),
    "ssim_3d": lambda a, b: fusedsim.fused_ssim(a[:, :1, :32, :32, None].expand(-1, -1, -1, -1, 32).contiguous(),
                                                b[:, :1, :32, :32, None].expand(-1, -1, -1, -1, 32).contiguous()),
}


@pytest.mark.parametrize("name", list(PUBLIC_CALLS))
def test_default_path_never_synchronises(kernel_device, name):
    _gpu(kernel_device)
    x, y = _pair((1, 3, 200, 210), kernel_device, dtype=torch.float32, seed=14)
    x.requires_grad_(True)
    fn = PUBLIC_CALLS[name]
    fn(x, y).backward()  # first call: compiles and plans (may synchronise)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            fn(x, y).backward()
            with torch.no_grad():
                fn(x, y)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_runs_on_the_current_cuda_stream(kernel_device):
    _gpu(kernel_device)
    x, y = _pair((2, 3, 64, 80), kernel_device, dtype=torch.float32, seed=12)
    expected = fusedsim.fused_ssim(x, y)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = fusedsim.fused_ssim(x, y)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    torch.testing.assert_close(got, expected)


def test_training_step_replays_in_a_cuda_graph(kernel_device):
    _gpu(kernel_device)
    target = _pair((1, 3, 96, 130), kernel_device, dtype=torch.float32, seed=15)[1]
    image = torch.rand_like(target, requires_grad=True)
    opt = torch.optim.Adam([image], lr=1e-2, capturable=True)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = fusedsim.l1_ssim_loss(image, target) + (1 - fusedsim.fused_ssim(image, target))
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up: compile, plan, allocate
            step()
    torch.cuda.current_stream().wait_stream(side)
    start = image.detach().clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    graph_losses = []
    for _ in range(20):
        graph.replay()
        graph_losses.append(static_loss.clone())
    torch.cuda.synchronize()
    assert all(torch.isfinite(v) for v in graph_losses)
    assert not torch.equal(image.detach(), start)  # the replays trained the image
    assert graph_losses[-1] < graph_losses[0]


def test_graph_replay_is_identical_to_eager(kernel_device):
    _gpu(kernel_device)
    x, y = _pair((1, 3, 120, 97), kernel_device, dtype=torch.float32, seed=16)
    x.requires_grad_(True)

    def fwd_bwd():
        loss = fusedsim.l1_ssim_loss(x, y)
        (g,) = torch.autograd.grad(loss, x)
        return loss, g

    side = torch.cuda.Stream()  # eager runs and warm-up off the legacy default stream, as capture requires
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager_loss, eager_grad = (t.detach() for t in fwd_bwd())
        fwd_bwd()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss, static_grad = fwd_bwd()
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_loss, eager_loss)  # deterministic reductions: bit-identical
        assert torch.equal(static_grad, eager_grad)


def test_compile_reduce_overhead_fullgraph(kernel_device):
    _gpu(kernel_device)
    x, y = _pair((1, 3, 64, 72), kernel_device, dtype=torch.float32, seed=17)
    x.requires_grad_(True)

    def loss(a, b):
        return fusedsim.l1_ssim_loss(a, b) + (1 - fusedsim.ms_ssim(a.repeat(1, 1, 3, 3), b.repeat(1, 1, 3, 3),
                                                                     data_range=1.0))

    eager = loss(x, y)
    (g_eager,) = torch.autograd.grad(eager, x)
    compiled = torch.compile(loss, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        value = compiled(x, y)
        (g_compiled,) = torch.autograd.grad(value, x)
    torch.testing.assert_close(value, eager)
    torch.testing.assert_close(g_compiled, g_eager)


@pytest.mark.parametrize("reduce", [1, 3])
def test_saved_gradient_maps_backward_3d(kernel_device, reduce):
    """3-D training calls save the unit maps too; the backward skips the statistics pass and scales the adjoint
    filter by the per-plane upstream gradient (the fused L1 term added in PyTorch)."""
    from fusedsim.ssim.kernels import SSIMPlan
    from fusedsim.core.moments.twin import gaussian_window
    from fusedsim.ssim.twin import ssim_reduce_ref

    x, y = _pair((2, 1, 6, 7, 9), kernel_device, seed=23)
    win = gaussian_window(3, 1.5, device=kernel_device)[None]
    plan = SSIMPlan(x.shape, x.stride(), y.stride(), x.dtype, x.device, 3, 1e-4, 9e-4, True, True, reduce, 0.4)
    out, saved = plan.forward_for_grad((True, True), x, y, win)
    assert saved[0].shape == (4, 2 * 4, 5, 7)  # bm, cm, ax, ay on the valid output grid of every depth slice
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    ref = ssim_reduce_ref(xr, yr, win, 1e-4, 9e-4, True, True, reduce, 0.4)
    torch.testing.assert_close(out, ref.detach(), atol=1e-9, rtol=1e-9)
    g = torch.randn(ref.shape, dtype=torch.float64, device=kernel_device)
    got = plan.backward((x, y, win), saved, g, (True, True))[:2]
    for grad, expected in zip(got, torch.autograd.grad(ref, (xr, yr), g)):
        torch.testing.assert_close(grad, expected, atol=1e-9, rtol=1e-8)


@pytest.mark.parametrize("valid", [False, True])
def test_fused_l1_3d_counts_every_voxel_once(kernel_device, valid):
    """The 3-D L1 term is summed inside the statistics pass: with several column strips, row segments and depth
    slices (and, in ``valid`` mode, voxels outside the output grid) each voxel counts once; value and both
    gradients equal the twin's, through the saved-map and the recomputing backward."""
    from fusedsim.ssim.kernels import SSIMPlan
    from fusedsim.core.moments.twin import gaussian_window
    from fusedsim.ssim.twin import ssim_reduce_ref

    x, y = _pair((2, 1, 6, 10, 21), kernel_device, seed=29)
    win = gaussian_window(3, 1.5, device=kernel_device)[None]
    plan = SSIMPlan(x.shape, x.stride(), y.stride(), x.dtype, x.device, 3, 1e-4, 9e-4, valid, True, 2, 0.4,
                    fwd_tile=(16, 4, 1))
    xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    ref = ssim_reduce_ref(xr, yr, win, 1e-4, 9e-4, valid, True, 2, 0.4)
    g = torch.randn(ref.shape, dtype=torch.float64, device=kernel_device)
    want = torch.autograd.grad(ref, (xr, yr), g)
    out, saved = plan.forward_for_grad((True, True), x, y, win)
    torch.testing.assert_close(out, ref.detach(), atol=1e-9, rtol=1e-9)
    for state in (saved, ()):
        for grad, expected in zip(plan.backward((x, y, win), state, g, (True, True))[:2], want):
            torch.testing.assert_close(grad, expected, atol=1e-9, rtol=1e-8)


def test_saved_maps_backward_compiles_for_one_row_planes_and_carries_its_chains():
    """Compiled for sm_90 (not the interpreter): Triton turns integer arguments equal to 1 into constants, so a
    1-pixel plane must compile; the row loop carries the three maps' vertical chains (3 x 10 pending rows) and
    the next row's 3 x 11 prefetched taps (shifted loads) or 3 x 3 segments (lane shifts)."""
    from _offline_compile import carried_per_loop, compiled_asm

    sig = {name: "*fp32" for name in ("X", "Y", "MAPS", "WINF", "G", "DX", "DY")}
    sig.update({name: "i32" for name in ("g_off_s", "g_off_cs", "gsn", "gsc", "div_s", "div_l1", "C", "H", "W",
                                         "WO", "sxn", "sxc", "sxh", "sxw", "syn", "syc", "syh", "syw")})
    sig.update({name: "fp32" for name in ("ws_hi", "ws_lo", "wl_hi", "wl_lo")})
    sig.update({name: "constexpr" for name in ("HO", "OFF", "BW", "RS", "ACC", "HAS_L1")})
    consts = {"HO": 1, "OFF": 0, "BW": 32, "RS": 32, "ACC": "tl.float32", "HAS_L1": True}
    carried = carried_per_loop("fusedsim.ssim.kernels:_saved_backward_kernel(11, ('bm', 'cm', 'ax'), False)", sig,
                               consts, num_warps=1)
    assert carried == [3 * 10 + 3 * 11], carried
    # with lane-shifted taps the next row is three aligned segments per map, and the taps are warp shuffles
    # (the whole gain: 33 fewer registers, no shared memory; benchmarks/NOTES.md, "Lane-shifted taps")
    lanes = "fusedsim.ssim.kernels:_saved_backward_kernel(11, ('bm', 'cm', 'ax'), False, True)"
    assert carried_per_loop(lanes, sig, consts, num_warps=1) == [3 * 10 + 3 * 3]
    ptx = compiled_asm(lanes, sig, consts, "ptx", num_warps=1)
    assert ptx.count("shfl.sync") == 3 * 10 and "st.shared" not in ptx


def test_plans_refuse_tensors_on_another_device():
    """The SSIM plans hand raw addresses to Triton's launcher, which then cannot tell a host pointer from a device
    one: every tensor must be on the first one's device, checked when the plan is made (no GPU needed)."""
    from fusedsim.ssim.kernels import ms_ssim_plan, ssim_plan

    x = torch.rand(1, 1, 16, 16)
    win_elsewhere = torch.empty(1, 7, device="meta")
    with pytest.raises(ValueError, match=r"win is on meta, x on cpu"):
        ssim_plan((x, x, win_elsewhere), (1e-4, 9e-4, False, True, 1, -1.0))
    with pytest.raises(ValueError, match=r"y is on meta, x on cpu"):
        ssim_plan((x, x.to("meta"), win_elsewhere), (1e-4, 9e-4, False, True, 1, -1.0))
    with pytest.raises(ValueError, match=r"weights is on meta, x on cpu"):
        ms_ssim_plan((x, x, torch.ones(1, 7), torch.ones(3, device="meta")), (1e-4, 9e-4, True, 1))
