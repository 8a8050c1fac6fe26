"""Training on openreg matches training on the CPU.

Each model is built on the CPU, deep-copied, and the copy moved to openreg, so
both start from the same weights. Forward outputs, losses, every parameter's
gradient (and buffers such as BatchNorm running statistics) are compared.
"""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import DEVICE, make_cpu


def _twin(model):
    """(cpu_model, openreg_model) with identical initial weights."""
    return model, copy.deepcopy(model).to(DEVICE)


def _check_params_and_grads(cpu_model, dev_model, **tol):
    cpu_named = dict(cpu_model.named_parameters())
    dev_named = dict(dev_model.named_parameters())
    assert cpu_named.keys() == dev_named.keys()
    for name, p in cpu_named.items():
        q = dev_named[name]
        assert q.device.type == DEVICE, name
        torch.testing.assert_close(q.detach().cpu(), p.detach(), msg=lambda m: f"{name}: {m}", **tol)
        if p.grad is None:
            assert q.grad is None, name
            continue
        assert q.grad is not None, name
        assert q.grad.device.type == DEVICE, name
        assert q.grad.shape == p.grad.shape, name
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=lambda m: f"grad of {name}: {m}", **tol)
    for name, b in cpu_model.named_buffers():
        db = dict(dev_model.named_buffers())[name]
        assert db.device.type == DEVICE, name
        torch.testing.assert_close(db.cpu(), b, msg=lambda m: f"buffer {name}: {m}", **tol)


def _run(cpu_model, dev_model, x, loss_fn, *extra):
    """Forward + backward on both; returns (cpu_out, dev_out, cpu_xgrad, dev_xgrad)."""
    xc = x.clone().requires_grad_()
    xd = x.to(DEVICE).requires_grad_()
    out_c = cpu_model(xc)
    out_d = dev_model(xd)
    assert out_d.device.type == DEVICE
    loss_c = loss_fn(out_c, *extra)
    loss_d = loss_fn(out_d, *[e.to(DEVICE) for e in extra])
    loss_c.backward()
    loss_d.backward()
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    torch.testing.assert_close(loss_d.detach().cpu(), loss_c.detach())
    assert xd.grad is not None and xd.grad.device.type == DEVICE
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    return out_c, out_d


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))


def _mlp_loss(out, target):
    return F.nll_loss(F.log_softmax(out, dim=1), target)


def test_mlp_forward_backward():
    cpu_model, dev_model = _twin(_mlp())
    x = make_cpu((8, 10), torch.float32)
    target = torch.tensor([0, 1, 2, 3, 3, 2, 1, 0])
    _run(cpu_model, dev_model, x, _mlp_loss, target)
    _check_params_and_grads(cpu_model, dev_model)


def test_mlp_float64_is_exact():
    cpu_model, dev_model = _twin(_mlp().double())
    x = make_cpu((8, 10), torch.float64)
    target = torch.tensor([0, 1, 2, 3, 3, 2, 1, 0])
    _run(cpu_model, dev_model, x, _mlp_loss, target)
    # Same kernels on the same layouts: the gradients agree bit for bit.
    for (name, p), q in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert torch.equal(q.grad.cpu(), p.grad), name


def test_mlp_sgd_steps_same_losses():
    cpu_model, dev_model = _twin(_mlp())
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    opt_d = torch.optim.SGD(dev_model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    x = make_cpu((16, 10), torch.float32, seed=3)
    target = make_cpu((16,), torch.int64, seed=4, low=0, high=3)
    xd, td = x.to(DEVICE), target.to(DEVICE)
    losses_c, losses_d = [], []
    for _ in range(4):
        for model, opt, xx, tt, losses in (
            (cpu_model, opt_c, x, target, losses_c),
            (dev_model, opt_d, xd, td, losses_d),
        ):
            opt.zero_grad()
            loss = _mlp_loss(model(xx), tt)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    torch.testing.assert_close(torch.tensor(losses_d), torch.tensor(losses_c))
    assert losses_c[-1] < losses_c[0]
    _check_params_and_grads(cpu_model, dev_model)
    # the optimizer state lives on the device
    for p in dev_model.parameters():
        assert opt_d.state[p]["momentum_buffer"].device.type == DEVICE


def test_adam_step():
    cpu_model, dev_model = _twin(_mlp())
    opt_c = torch.optim.Adam(cpu_model.parameters(), lr=1e-2, foreach=False)
    opt_d = torch.optim.Adam(dev_model.parameters(), lr=1e-2, foreach=False)
    x = make_cpu((8, 10), torch.float32, seed=5)
    target = make_cpu((8,), torch.int64, seed=6, low=0, high=3)
    for model, opt, xx, tt in ((cpu_model, opt_c, x, target), (dev_model, opt_d, x.to(DEVICE), target.to(DEVICE))):
        for _ in range(2):
            opt.zero_grad()
            _mlp_loss(model(xx), tt).backward()
            opt.step()
    _check_params_and_grads(cpu_model, dev_model)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=4)
        self.deconv = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.gap = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = F.relu(self.conv2(x))
        x = self.deconv(x)
        x = self.gap(x)
        return self.fc(torch.flatten(x, 1))


def _cnn():
    torch.manual_seed(0)
    return SmallCNN()


def test_cnn_forward_backward():
    cpu_model, dev_model = _twin(_cnn())
    x = make_cpu((2, 3, 12, 12), torch.float32)
    target = torch.tensor([1, 4])
    _run(cpu_model, dev_model, x, F.cross_entropy, target)
    _check_params_and_grads(cpu_model, dev_model)


def test_cnn_eval_mode():
    cpu_model, dev_model = _twin(_cnn())
    x = make_cpu((2, 3, 12, 12), torch.float32)
    # a training step to move the running statistics off their defaults
    cpu_model(x)
    dev_model(x.to(DEVICE))
    cpu_model.eval()
    dev_model.eval()
    with torch.no_grad():
        out_c = cpu_model(x)
        out_d = dev_model(x.to(DEVICE))
    torch.testing.assert_close(out_d.cpu(), out_c)
    _check_params_and_grads(cpu_model, dev_model)


def test_cnn_sgd_steps_same_losses():
    cpu_model, dev_model = _twin(_cnn())
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=0.05, momentum=0.9)
    opt_d = torch.optim.SGD(dev_model.parameters(), lr=0.05, momentum=0.9)
    x = make_cpu((4, 3, 12, 12), torch.float32, seed=1)
    target = torch.tensor([0, 1, 2, 3])
    losses_c, losses_d = [], []
    for _ in range(3):
        for model, opt, xx, tt, losses in (
            (cpu_model, opt_c, x, target, losses_c),
            (dev_model, opt_d, x.to(DEVICE), target.to(DEVICE), losses_d),
        ):
            opt.zero_grad()
            loss = F.cross_entropy(model(xx), tt)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    torch.testing.assert_close(torch.tensor(losses_d), torch.tensor(losses_c))
    _check_params_and_grads(cpu_model, dev_model)


def test_channels_last_conv():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, padding=1)
    cpu_model, dev_model = _twin(conv)
    x = make_cpu((2, 4, 7, 7), torch.float32).contiguous(memory_format=torch.channels_last)
    xd = x.to(DEVICE)
    assert xd.is_contiguous(memory_format=torch.channels_last)
    out_c = cpu_model(x)
    out_d = dev_model(xd)
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    out_c.sum().backward()
    out_d.sum().backward()
    _check_params_and_grads(cpu_model, dev_model)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "make,shape",
    [
        (lambda b: nn.Conv1d(3, 6, 3, stride=2, padding=1, bias=b), (2, 3, 11)),
        (lambda b: nn.Conv1d(4, 4, 3, padding=2, dilation=2, groups=2, bias=b), (2, 4, 9)),
        (lambda b: nn.ConvTranspose1d(3, 2, 4, stride=2, bias=b), (2, 3, 5)),
        (lambda b: nn.Conv3d(2, 4, 3, padding=1, bias=b), (1, 2, 5, 5, 5)),
        (lambda b: nn.Conv3d(4, 4, (1, 3, 3), stride=(1, 2, 2), groups=4, bias=b), (2, 4, 3, 6, 6)),
        (lambda b: nn.ConvTranspose3d(2, 3, 2, stride=2, bias=b), (1, 2, 3, 3, 3)),
    ],
    ids=["conv1d", "conv1d_grouped_dilated", "convtranspose1d", "conv3d", "conv3d_depthwise", "convtranspose3d"],
)
def test_conv_nd(make, shape, bias):
    torch.manual_seed(0)
    cpu_model, dev_model = _twin(make(bias))
    x = make_cpu(shape, torch.float32, seed=2)
    _run(cpu_model, dev_model, x, lambda out: (out * out).mean())
    _check_params_and_grads(cpu_model, dev_model)
    if not bias:
        assert dev_model.bias is None


def test_functional_conv2d_no_input_grad():
    w = make_cpu((4, 3, 3, 3), torch.float32, seed=1).requires_grad_()
    wd = w.detach().to(DEVICE).requires_grad_()
    x = make_cpu((2, 3, 6, 6), torch.float32, seed=2)
    out_c = F.conv2d(x, w, stride=1, padding=1)
    out_d = F.conv2d(x.to(DEVICE), wd, stride=1, padding=1)
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    out_c.sum().backward()
    out_d.sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)


def test_conv_mixed_devices_raise():
    conv = nn.Conv2d(3, 4, 3).to(DEVICE)
    with pytest.raises(RuntimeError, match="same device|Input type .* and weight type"):
        conv(torch.ones(1, 3, 5, 5))
    conv1 = nn.Conv2d(3, 4, 3).to("openreg:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        conv1(torch.ones(1, 3, 5, 5, device="openreg:0"))


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_rnn_forward_backward(cell):
    torch.manual_seed(0)
    rnn = getattr(nn, cell)(input_size=4, hidden_size=6, num_layers=2, batch_first=True)
    cpu_model, dev_model = _twin(rnn)
    x = make_cpu((3, 5, 4), torch.float32, seed=1)
    xc = x.clone().requires_grad_()
    xd = x.to(DEVICE).requires_grad_()
    out_c, state_c = cpu_model(xc)
    out_d, state_d = dev_model(xd)
    assert out_d.device.type == DEVICE
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    states_c = state_c if isinstance(state_c, tuple) else (state_c,)
    states_d = state_d if isinstance(state_d, tuple) else (state_d,)
    for sd, sc in zip(states_d, states_c):
        torch.testing.assert_close(sd.detach().cpu(), sc.detach())
    loss_c = out_c.pow(2).sum() + sum(s.sum() for s in states_c)
    loss_d = out_d.pow(2).sum() + sum(s.sum() for s in states_d)
    loss_c.backward()
    loss_d.backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    _check_params_and_grads(cpu_model, dev_model)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell"])
def test_rnn_cell_forward_backward(cell):
    torch.manual_seed(0)
    mod = getattr(nn, cell)(4, 6)
    cpu_model, dev_model = _twin(mod)
    x = make_cpu((3, 4), torch.float32, seed=1)
    out_c = cpu_model(x)
    out_d = dev_model(x.to(DEVICE))
    outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
    outs_d = out_d if isinstance(out_d, tuple) else (out_d,)
    for od, oc in zip(outs_d, outs_c):
        torch.testing.assert_close(od.detach().cpu(), oc.detach())
    sum(o.sum() for o in outs_c).backward()
    sum(o.sum() for o in outs_d).backward()
    _check_params_and_grads(cpu_model, dev_model)


def test_embedding_layernorm_dropout_eval():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8), nn.Dropout(0.5), nn.Linear(8, 3)).eval()
    cpu_model, dev_model = _twin(model)
    idx = make_cpu((4, 5), torch.int64, low=0, high=9)
    out_c = cpu_model(idx)
    out_d = dev_model(idx.to(DEVICE))
    torch.testing.assert_close(out_d.detach().cpu(), out_c.detach())
    out_c.sum().backward()
    out_d.sum().backward()
    _check_params_and_grads(cpu_model, dev_model)


def test_autograd_grad_and_double_backward():
    x = make_cpu((5,), torch.float64).requires_grad_()
    xd = x.detach().to(DEVICE).requires_grad_()
    for t in (x, xd):
        y = (t.sin() * t).sum()
        (g,) = torch.autograd.grad(y, t, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), t)
        t._g, t._gg = g.detach(), gg
    torch.testing.assert_close(xd._g.cpu(), x._g)
    torch.testing.assert_close(xd._gg.cpu(), x._gg)


def test_backward_of_view_and_index_ops():
    x = make_cpu((4, 6), torch.float32).requires_grad_()
    xd = x.detach().to(DEVICE).requires_grad_()
    idx = torch.tensor([0, 2, 2])
    for t, i in ((x, idx), (xd, idx.to(DEVICE))):
        y = t.t()[1:5:2] * 3 + t[i].sum() + t.unfold(1, 2, 2).pow(2).sum() + t.cumsum(1).mean()
        y.sum().backward()
    assert xd.grad.device.type == DEVICE
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
