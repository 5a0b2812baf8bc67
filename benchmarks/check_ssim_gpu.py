"""Quick GPU correctness sweep of the SSIM kernels against the float64 twin (prints max errors)."""

import torch

from fusedsim.ops import ssim as ops
from fusedsim.reference.ssim_ref import gaussian_window, ssim_maps_ref

torch.manual_seed(0)
worst = 0.0
for shape, k, valid in [((2, 3, 13, 17), 11, True), ((1, 2, 67, 301), 11, False), ((1, 1, 9, 8, 10), 3, True),
                        ((1, 1, 17, 19, 21), 5, False), ((2, 1, 200, 130), 31, True), ((1, 3, 1080, 1920), 11, False)]:
    for dtype in (torch.float32, torch.float64):
        x = torch.rand(shape, dtype=torch.float64, device="cuda")
        y = (x + 0.2 * torch.randn_like(x)).clamp(0, 1)
        xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
        win = gaussian_window(k, 1.5, device="cuda").repeat(shape[1], 1)
        sm, csm = ssim_maps_ref(xr, yr, win, 1e-4, 9e-4, "valid" if valid else "same")
        s, cs, m = ops.ssim_sums_fwd(x.to(dtype), y.to(dtype), win.to(dtype), 1e-4, 9e-4, valid, write_map=True)
        planes = sm.shape[0] * sm.shape[1]
        gs = torch.randn(planes, dtype=torch.float64, device="cuda")
        gcs = torch.randn_like(gs)
        loss = (sm.flatten(2).sum(-1).flatten() * gs).sum() + (csm.flatten(2).sum(-1).flatten() * gcs).sum()
        dxr, dyr = torch.autograd.grad(loss, (xr, yr))
        dx, dy = ops.ssim_bwd(x.to(dtype), y.to(dtype), win.to(dtype), 1e-4, 9e-4, valid, gs.to(dtype),
                              gcs.to(dtype), None, True, True)
        rel = lambda a, b: ((a.double() - b).norm() / b.norm()).item()  # noqa: E731
        errs = (rel(m, sm.detach()), rel(dx, dxr), rel(dy, dyr))
        print(shape, k, valid, dtype, ["%.2e" % e for e in errs])
        if dtype == torch.float64:
            worst = max(worst, *errs)
print("worst float64 relative error", worst)
