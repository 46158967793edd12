"""Why accelbench gives fused SGD zero momentum buffers up front: a GradScaler's skipped first step on a CUDA GPU.

For each SGD implementation (``fused=True``, ``fused=True`` with zero momentum buffers created up front as
accelbench's ``make_optimizer`` does, ``foreach=True``) this script
1. on a Linear layer: (a) one finite step, then one step whose gradients are non-finite (the scaler must
   skip it): did the weights or momentum buffers change? (b) a first step that overflows, then 3 finite
   ones: are the losses finite?
2. trains cifar-resnet20 (random init, real CIFAR-10 images, batch 32, amp-fp16, lr 0.01, 60 steps)
   with the same GradScaler loop accelbench uses and reports the first and last loss.

Usage (GPU): ``PYTHONPATH=src python benchmarks/fused_sgd_overflow.py > result.json``
"""

import json
import math
import sys

import torch
import torch.nn.functional as F

IMPLS = ("fused", "fused+zero-momentum", "foreach")


def make_sgd(params, impl: str, **kw):
    from accelbench.training.step import zero_momentum_buffers

    opt = torch.optim.SGD(params, momentum=0.9, **kw, **{impl.split("+")[0]: True})
    if impl.endswith("+zero-momentum"):
        zero_momentum_buffers(opt)
    return opt


def overflow_check(impl: str) -> dict:
    dev = torch.device("cuda")
    x, y = torch.randn(16, 8, device=dev), torch.randint(0, 4, (16,), device=dev)

    def fresh():
        torch.manual_seed(0)
        m = torch.nn.Linear(8, 4).to(dev)
        return m, make_sgd(m.parameters(), impl, lr=0.1), torch.amp.GradScaler("cuda")

    def step(m, opt, scaler, inp):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(m(inp).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    m, opt, scaler = fresh()  # (a) overflow after a finite step
    step(m, opt, scaler, x)
    w = [p.detach().clone() for p in m.parameters()]
    b = [opt.state[p]["momentum_buffer"].clone() for p in m.parameters()]
    step(m, opt, scaler, x * float("inf"))
    out = {
        "impl": impl,
        "later_skip_weights_unchanged": all(torch.equal(p, q) for p, q in zip(m.parameters(), w)),
        "later_skip_momentum_unchanged": all(
            torch.equal(opt.state[p]["momentum_buffer"], q) for p, q in zip(m.parameters(), b)
        ),
    }
    m, opt, scaler = fresh()  # (b) the first step overflows
    step(m, opt, scaler, x * float("inf"))
    losses = [step(m, opt, scaler, x) for _ in range(3)]
    out.update(first_skip_losses=losses, first_skip_losses_finite=all(map(math.isfinite, losses)))
    return out


def resnet20_run(impl: str, steps: int = 60) -> dict:
    from accelbench.data import load_images
    from accelbench.models import create_model

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = create_model("cifar-resnet20", pretrained=False).module.to(dev).train()
    raw = load_images("cifar10-train-5k", 256)
    x, y = raw.images.to(dev).float() / 255, raw.labels.to(dev)
    opt = make_sgd(model.parameters(), impl, lr=0.01, weight_decay=5e-4)
    scaler = torch.amp.GradScaler("cuda")
    losses, skipped = [], 0
    for i in range(steps):
        j = (i * 32) % x.shape[0]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x[j : j + 32]).float(), y[j : j + 32])
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < scale
        losses.append(loss.item())
    return {
        "impl": impl,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "nonfinite_losses": sum(not math.isfinite(v) for v in losses),
        "first_nonfinite_step": next((i for i, v in enumerate(losses) if not math.isfinite(v)), None),
        "skipped_steps": skipped,
    }


if __name__ == "__main__":
    out = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "overflow": [overflow_check(i) for i in IMPLS],
    }
    try:
        out["resnet20"] = [resnet20_run(i) for i in IMPLS]
    except Exception as e:  # the data helper's API is secondary to the overflow check above
        out["resnet20_error"] = f"{type(e).__name__}: {e}"
    json.dump(out, sys.stdout, indent=1)
    print()
