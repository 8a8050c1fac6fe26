"""torch.amp.GradScaler("openreg") against GradScaler("cpu") on the same computation.

The openreg side trains under torch.autocast("openreg"); the CPU side makes the
same casts explicitly (CPU autocast has other lists), so losses, parameters,
scales and skipped steps are compared bit for bit.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, assert_same, make_cpu

UNSCALE = "aten::_amp_foreach_non_finite_check_and_unscale_"
UPDATE = "aten::_amp_update_scale_"


# ---------------------------------------------------------------------------
# The two kernels, differential against the CPU's.


@pytest.mark.parametrize("inject", [None, float("inf"), float("nan"), float("-inf")])
def test_unscale_matches_cpu(inject):
    # (base, view): the view is taken on each device, so strides match.
    cases = [
        (make_cpu((7, 5)), lambda t: t),
        (make_cpu((33,), torch.float16, seed=1), lambda t: t),
        (make_cpu((4, 6), torch.bfloat16, seed=2), lambda t: t.t()),  # not contiguous
        (make_cpu((3, 8), seed=3), lambda t: t[:, ::2]),  # strided with gaps
    ]
    if inject is not None:
        cases[2][0][1, 2] = inject
    grads = [view(base.clone()) for base, view in cases]
    dev_grads = [view(base.to(DEVICE)) for base, view in cases]
    inv_scale = torch.full((), 1 / 1024.0)
    found_inf = torch.zeros(())
    dev_found_inf, dev_inv_scale = found_inf.to(DEVICE), inv_scale.to(DEVICE)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        pick = [i for i, g in enumerate(grads) if g.dtype == dtype]
        torch._amp_foreach_non_finite_check_and_unscale_([grads[i] for i in pick], found_inf, inv_scale)
        torch._amp_foreach_non_finite_check_and_unscale_([dev_grads[i] for i in pick], dev_found_inf, dev_inv_scale)
    assert found_inf.item() == (0.0 if inject is None else 1.0)
    assert_same(dev_found_inf, found_inf)
    for dev, cpu in zip(dev_grads, grads):
        assert dev.stride() == cpu.stride()
        torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0, equal_nan=True)


def test_update_scale_matches_cpu():
    scale, tracker = torch.full((), 8.0), torch.zeros((), dtype=torch.int32)
    dev_scale, dev_tracker = scale.to(DEVICE), tracker.to(DEVICE)
    for found in [0, 0, 0, 1, 0, 0, 0, 0, 1, 1]:
        found_inf = torch.full((), float(found))
        torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3)
        out = torch._amp_update_scale_(dev_scale, dev_tracker, found_inf.to(DEVICE), 2.0, 0.5, 3)
        assert out is dev_scale
        assert_same(dev_scale, scale)
        assert_same(dev_tracker, tracker)


def test_kernels_run_without_the_fallback():
    torch.openreg.reset_fallback_stats()
    grads = [make_cpu((16,)).to(DEVICE)]
    found_inf = torch.zeros((), device=DEVICE)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.ones((), device=DEVICE))
    scale, tracker = torch.ones((), device=DEVICE), torch.zeros((), dtype=torch.int32, device=DEVICE)
    torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 10)
    stats = torch.openreg.fallback_stats()
    assert UNSCALE not in stats and UPDATE not in stats, stats


def test_unscale_of_no_gradients_is_a_no_op():
    found_inf = torch.zeros(())  # not even checked, as on CPU and CUDA
    torch._amp_foreach_non_finite_check_and_unscale_([], found_inf, torch.ones(()))


@pytest.mark.parametrize("which", ["grad", "found_inf", "inv_scale"])
def test_unscale_refuses_cpu_tensors(which):
    args = {
        "grad": make_cpu((4,)).to(DEVICE),
        "found_inf": torch.zeros((), device=DEVICE),
        "inv_scale": torch.ones((), device=DEVICE),
    }
    args[which] = args[which].cpu()
    name = "each of scaled_grads" if which == "grad" else which
    with pytest.raises(RuntimeError, match=f"{UNSCALE}: {name} must be an openreg tensor.*got a tensor on cpu"):
        torch._amp_foreach_non_finite_check_and_unscale_([args["grad"]], args["found_inf"], args["inv_scale"])


@pytest.mark.parametrize("which", ["scale", "growth_tracker", "found_inf"])
def test_update_scale_refuses_cpu_tensors(which):
    args = {
        "scale": torch.ones((), device=DEVICE),
        "growth_tracker": torch.zeros((), dtype=torch.int32, device=DEVICE),
        "found_inf": torch.zeros((), device=DEVICE),
    }
    args[which] = args[which].cpu()
    name = "current_scale" if which == "scale" else which
    with pytest.raises(RuntimeError, match=f"{UPDATE}: {name} must be an openreg tensor"):
        torch._amp_update_scale_(args["scale"], args["growth_tracker"], args["found_inf"], 2.0, 0.5, 10)


def test_unscale_refuses_tensors_on_two_devices():
    if torch.openreg.device_count() < 2:
        pytest.skip("needs two openreg devices")
    grads = [make_cpu((4,)).to("openreg:1")]
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*openreg:0.*openreg:1"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            grads, torch.zeros((), device="openreg:0"), torch.ones((), device="openreg:0")
        )


def test_bad_dtypes_get_pytorchs_messages():
    grads = [make_cpu((4,)).to(DEVICE)]
    found_inf = torch.zeros((), device=DEVICE)
    with pytest.raises(RuntimeError, match="inv_scale must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.ones((), device=DEVICE).double())
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(2, device=DEVICE), found_inf)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(torch.ones((), device=DEVICE), torch.zeros((), device=DEVICE), found_inf, 2.0, 0.5, 10)


# ---------------------------------------------------------------------------
# Training: autocast + GradScaler on openreg == explicit casts + GradScaler on the CPU.


def _mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _forward_explicit(model, x, dtype):
    """What autocast does for this MLP: linear in ``dtype``, mse_loss in float32."""
    h = F.linear(x.to(dtype), model[0].weight.to(dtype), model[0].bias.to(dtype)).relu()
    return F.linear(h, model[2].weight.to(dtype), model[2].bias.to(dtype))


def _train(device, steps, inject_at=(), dtype=torch.float16, growth_interval=3, scaler_state=None):
    """Losses, scales and optimizer.step() calls of a short run; the model at the end."""
    model = _mlp()
    if device == DEVICE:
        model = copy.deepcopy(model).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=growth_interval)
    if scaler_state is not None:
        scaler.load_state_dict(scaler_state)
    calls = []
    step = opt.step
    opt.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    losses, scales = [], []
    for i in range(steps):
        x = make_cpu((8, 6), seed=100 + i).to(device)
        y = make_cpu((8, 3), seed=200 + i).to(device)
        if device == DEVICE:
            with torch.autocast(DEVICE, dtype=dtype):
                loss = F.mse_loss(model(x), y)
        else:
            loss = F.mse_loss(_forward_explicit(model, x, dtype).float(), y)
        assert loss.dtype == torch.float32
        opt.zero_grad()
        scaler.scale(loss).backward()
        if i in inject_at:
            with torch.no_grad():
                model[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        losses.append(loss.detach().cpu())
        scales.append(scaler.get_scale())
    return model, losses, scales, len(calls), scaler


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_training_loop_matches_cpu(dtype):
    dev_model, dev_losses, dev_scales, dev_calls, _ = _train(DEVICE, 8, inject_at={4}, dtype=dtype)
    cpu_model, cpu_losses, cpu_scales, cpu_calls, _ = _train("cpu", 8, inject_at={4}, dtype=dtype)
    for a, b in zip(dev_losses, cpu_losses):
        assert torch.equal(a, b)
    assert dev_scales == cpu_scales
    assert dev_calls == cpu_calls == 7
    for (name, p), q in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert_same(q.detach(), p.detach())
        assert q.grad.dtype == torch.float32, name


def test_an_injected_inf_skips_exactly_one_step_and_backs_off():
    model, _, scales, calls, _ = _train(DEVICE, 5, inject_at={2}, growth_interval=100)
    assert calls == 4
    assert scales == [2.0**10, 2.0**10, 2.0**9, 2.0**9, 2.0**9]
    before, after = _train(DEVICE, 2)[0], _train(DEVICE, 3, inject_at={2})[0]
    for p, q in zip(before.parameters(), after.parameters()):
        assert torch.equal(p.detach().cpu(), q.detach().cpu())  # the third step changed nothing


def test_scale_grows_after_growth_interval_clean_steps():
    _, _, scales, calls, scaler = _train(DEVICE, 7, growth_interval=3)
    assert calls == 7
    assert scales == [2.0**10, 2.0**10, 2.0**11, 2.0**11, 2.0**11, 2.0**12, 2.0**12]
    assert scaler._get_growth_tracker() == 1


def test_state_dict_round_trip():
    *_, scaler = _train(DEVICE, 5, inject_at={1}, growth_interval=3)
    state = scaler.state_dict()
    assert state["scale"] == scaler.get_scale() and state["_growth_tracker"] == scaler._get_growth_tracker()
    fresh = torch.amp.GradScaler(DEVICE)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    # The restored scaler continues exactly as the original would.
    _, _, resumed, _, _ = _train(DEVICE, 3, scaler_state=state, growth_interval=3)
    _, _, reference, _, _ = _train("cpu", 3, scaler_state=state, growth_interval=3)
    assert resumed == reference


def test_deprecated_openreg_amp_grad_scaler():
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('openreg'"):
        scaler = torch.openreg.amp.GradScaler(init_scale=4.0)
    w = make_cpu((3,)).to(DEVICE).requires_grad_()
    scaler.scale(w.sum()).backward()
    assert_same(w.grad, torch.full((3,), 4.0))


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimizer_state_left_on_the_cpu_is_an_error(impl):
    w = make_cpu((3,)).to(DEVICE).requires_grad_()
    opt = torch.optim.Adam([w], **{impl: True})
    scaler = torch.amp.GradScaler(DEVICE)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    opt.state[w]["exp_avg"] = opt.state[w]["exp_avg"].cpu()
    scaler.scale(w.sum()).backward()
    with pytest.raises(
        RuntimeError, match="Expected all tensors to be on the same device, but found at least two devices"
    ):
        scaler.step(opt)
