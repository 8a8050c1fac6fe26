"""Which thread runs openreg's backward passes: the caller's, when the roots are on the current device, so that no
second OpenMP team slows the process; the engine's device thread otherwise, as on a GPU. Gradients always equal
the CPU's."""

import copy
import threading

import pytest
import torch
import torch.utils.checkpoint

from conftest import run_python


def mlp_gradients(device, inputs, weights):
    """Gradients of a two-layer MLP's loss with respect to its weights."""
    w1, w2 = (w.detach().to(device).requires_grad_() for w in weights)
    loss = torch.relu(inputs.to(device) @ w1).matmul(w2).logsumexp(1).sum()
    return torch.autograd.grad(loss, (w1, w2))


def record_threads(tensor, seen):
    """A hook noting the thread, the current openreg device and the multithreading switch it runs with."""

    def hook(grad):
        seen.append((threading.get_ident(), torch.openreg.current_device(), torch.autograd.is_multithreading_enabled()))

    tensor.register_hook(hook)


def test_backward_of_an_openreg_graph_runs_on_the_calling_thread():
    x = torch.randn(8, 4, device="openreg", requires_grad=True)
    seen = []
    record_threads(x, seen)
    (x * 2).sin().sum().backward()
    assert seen == [(threading.get_ident(), 0, False)]
    # The switch is the caller's again afterwards.
    assert torch.autograd.is_multithreading_enabled()
    torch.testing.assert_close(x.grad.cpu(), 2 * (2 * x.detach().cpu()).cos(), rtol=0, atol=0)


def test_a_caller_that_disabled_multithreading_keeps_it_disabled():
    x = torch.randn(3, device="openreg", requires_grad=True)
    with torch.autograd.set_multithreading_enabled(False):
        x.sum().backward()
        assert not torch.autograd.is_multithreading_enabled()
    assert torch.autograd.is_multithreading_enabled()


@pytest.mark.skipif(torch.openreg.device_count() < 2, reason="needs two openreg devices")
def test_roots_off_the_current_device_run_on_the_devices_thread():
    """A GPU runs a device's nodes on that device's worker thread, with the device current: so does openreg when
    the caller's current device is another one."""
    x = torch.randn(5, device="openreg:1", requires_grad=True)
    seen = []
    record_threads(x, seen)
    (x * x).sum().backward()
    [(thread, current, multithreading)] = seen
    assert thread != threading.get_ident() and current == 1 and multithreading
    assert torch.openreg.current_device() == 0
    torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu(), rtol=0, atol=0)


def test_gradients_equal_the_cpus_mixed_graphs_included():
    torch.manual_seed(0)
    inputs, weights = torch.randn(16, 32), (torch.randn(32, 64), torch.randn(64, 10))
    for got, expected in zip(mlp_gradients("openreg", inputs, weights), mlp_gradients("cpu", inputs, weights)):
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    # Graphs through both devices, rooted on openreg and on the CPU.
    w = torch.randn(32, 10, requires_grad=True)
    (inputs @ w).tanh().sum().backward()
    expected, w.grad = w.grad, None
    for root_device in ("openreg", "cpu"):
        (inputs @ w).to("openreg").tanh().to(root_device).sum().backward()
        torch.testing.assert_close(w.grad, expected, rtol=0, atol=0)
        w.grad = None


def test_reentrant_checkpoint_and_grad_of_grad():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(4, 8)

    def gradients(device):
        on_device = copy.deepcopy(model).to(device)
        inputs = x.to(device).requires_grad_()
        # A reentrant checkpoint calls backward from inside the backward pass.
        torch.utils.checkpoint.checkpoint(on_device, inputs, use_reentrant=True).sum().backward()
        checkpointed = [inputs.grad.cpu()] + [p.grad.cpu() for p in on_device.parameters()]
        (first,) = torch.autograd.grad(on_device(inputs).sum(), inputs, create_graph=True)
        (second,) = torch.autograd.grad(first.pow(2).sum(), inputs)
        return checkpointed + [first.detach().cpu(), second.cpu()]

    for got, expected in zip(gradients("openreg"), gradients("cpu")):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_backward_from_several_threads_at_once():
    torch.manual_seed(0)
    inputs, weights = torch.randn(16, 32), (torch.randn(32, 64), torch.randn(64, 10))
    expected = mlp_gradients("cpu", inputs, weights)
    results, errors = [], []

    def worker():
        try:
            for _ in range(5):
                results.append(mlp_gradients("openreg", inputs, weights))
        except Exception as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads) and not errors
    assert len(results) == 20
    for got in results:
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0)


@pytest.mark.slow
def test_a_training_process_keeps_one_openmp_team():
    """libgomp names a team's workers after the thread that started them: a worker named after the autograd
    engine's device thread means that thread ran parallel kernels, the process's second OpenMP team."""
    proc = run_python("""
        import os, torch
        torch.set_num_threads(2)
        model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to("openreg")
        inputs = torch.randn(256, 512, device="openreg")
        for _ in range(3):
            model(inputs).sum().backward()
        torch.openreg.synchronize()
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
        autograd = [name for name in names if name.startswith("pt_autograd")]
        print("AUTOGRAD_THREADS", len(autograd), len(set(autograd)))
    """)
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("AUTOGRAD_THREADS")]
    _, threads, distinct = line.split()
    assert threads == distinct, proc.stdout
