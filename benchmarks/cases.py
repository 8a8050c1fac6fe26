"""The benchmark suite's cases, one builder per group: each returns {case: (description, zero-argument callable)}
for one device ("openreg" or "cpu"), so that run.py times the same work on both, interleaved.

Not a script: run.py and distributed.py import it (the models and the training step are shared with the ranks).
"""


def small_cases(torch, device, quick):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, generator=g).to(device)
    b = torch.randn(16, generator=g).to(device)
    acc = torch.zeros(16, device=device)
    one = torch.ones(1, device=device)
    out = torch.empty(16, device=device)
    return {
        "empty": ("empty(16) (factory)", lambda: torch.empty(16, device=device)),
        "view": ("view(4, 4)", lambda: a.view(4, 4)),
        "as_strided": ("as_strided((4,), (4,))", lambda: a.as_strided((4,), (4,))),
        "add": ("add (stub kernel)", lambda: a + b),
        "atan2": ("atan2 (fallback)", lambda: torch.atan2(a, b)),
        "add_": ("add_ (in-place)", lambda: acc.add_(b)),
        "add_out": ("add(out=) (stub kernel)", lambda: torch.add(a, b, out=out)),
        "item": ("item() (1 element)", lambda: one.item()),
    }


def large_cases(torch, device, quick):
    F = torch.nn.functional
    n, batch, side, exponent = (256, 4, 28, 20) if quick else (1024, 32, 56, 24)
    g = torch.Generator().manual_seed(0)
    m1 = torch.randn(n, n, generator=g).to(device)
    m2 = torch.randn(n, n, generator=g).to(device)
    image = torch.randn(batch, 64, side, side, generator=g).to(device)
    weight = torch.randn(64, 64, 3, 3, generator=g).to(device)
    vector = torch.randn(1 << exponent, generator=g).to(device)
    return {
        "matmul": (f"matmul {n}x{n} float32", lambda: m1 @ m2),
        "conv2d": (f"conv2d {batch}x64x{side}x{side}, 3x3, 64 out", lambda: F.conv2d(image, weight, padding=1)),
        "sum": (f"sum of 2^{exponent} float32", lambda: vector.sum()),
    }


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def small_cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


def training_step(torch, model, inputs, labels):
    """One SGD step of `model` (already on the inputs' device) as a callable."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()

    return step


def training_cases(torch, device, quick, prepare=lambda model: model):
    """The MLP and CNN training steps; ``prepare`` wraps each model (``torch.compile`` for the compiled group)."""
    nn = torch.nn
    torch.manual_seed(0)  # same weights and batches on both devices
    labels = torch.randint(0, 10, (128,))
    return {
        "mlp": (
            "MLP 784-512-512-10, batch 128",
            training_step(torch, prepare(mlp(nn).to(device)), torch.randn(128, 784).to(device), labels.to(device)),
        ),
        "cnn": (
            "CNN conv16-bn-pool-conv32-pool-fc, 1x28x28, batch 64",
            training_step(
                torch, prepare(small_cnn(nn).to(device)), torch.randn(64, 1, 28, 28).to(device), labels[:64].to(device)
            ),
        ),
    }


def optimizer_cases(torch, device, quick):
    """One optimizer step over 100 parameters of 16 elements with gradients: the per-parameter loop and the
    foreach (multi-tensor) implementation of SGD with momentum and of Adam."""
    g = torch.Generator().manual_seed(0)
    cases = {}
    for name, make, description in (
        (
            "sgd",
            lambda params, foreach: torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=foreach),
            "SGD, momentum 0.9",
        ),
        ("adam", lambda params, foreach: torch.optim.Adam(params, lr=0.001, foreach=foreach), "Adam"),
    ):
        for foreach in (False, True):
            params = [torch.nn.Parameter(torch.randn(16, generator=g).to(device)) for _ in range(100)]
            for param in params:
                param.grad = torch.randn(16, generator=g).to(device)
            key = name + ("_foreach" if foreach else "")
            loop = "foreach" if foreach else "for-loop"
            cases[key] = (f"{description} ({loop}), 100 parameters", make(params, foreach).step)
    return cases


def compiled_training_cases(torch, device, quick):
    """The training steps with each model compiled (forward and backward; the SGD step runs eagerly). The
    warm-up call compiles."""
    return training_cases(torch, device, quick, prepare=torch.compile)


def compile_time_cases(torch, device, quick):
    """Each call resets Dynamo, compiles the MLP and runs one forward and backward (the backward graph compiles
    when it first runs): with every compiler cache disabled (cold: Inductor compiles in a fresh cache directory,
    C++ kernels included), and with the caches the warm-up call filled (warm: FX graph and AOTAutograd cache hits)."""
    import torch._inductor.config

    F = torch.nn.functional
    torch.manual_seed(0)
    model = mlp(torch.nn).to(device)
    inputs = torch.randn(128, 784).to(device)
    labels = torch.randint(0, 10, (128,)).to(device)

    def compile_and_step(cold):
        def run():
            torch._dynamo.reset()
            with torch._inductor.config.patch(force_disable_caches=cold):
                F.cross_entropy(torch.compile(model)(inputs), labels).backward()

        return run

    return {
        "cold": ("MLP forward+backward, caches off", compile_and_step(True)),
        "warm": ("MLP forward+backward, warm caches", compile_and_step(False)),
    }


def churn_cases(torch, device, quick):
    import allocator  # benchmarks/allocator.py, beside this script

    sizes = allocator.size_sequence(10_000 if quick else allocator.OPS)
    description = f"{len(sizes):,} tensors of 16 B-1 MiB, ring of {allocator.RING}"
    return {"mixed": (description, lambda: allocator.churn(device, sizes, allocator.RING))}


def copy_bytes(quick):
    return (32 if quick else 256) << 20


def copy_cases(torch, device, quick):
    """On openreg, the four copies; on the CPU, the same number of host memcpys."""
    nbytes = copy_bytes(quick)
    host_src = torch.ones(nbytes, dtype=torch.uint8)
    host_dst = torch.zeros(nbytes, dtype=torch.uint8)
    names = {
        "h2d": "host->device",
        "d2h": "device->host",
        "d2d": "device->device",
        "pinned_h2d": "pinned host->device, non_blocking",
    }
    size = f" {nbytes >> 20} MiB"
    if device == "cpu":
        import numpy

        src, dst = host_src.numpy(), host_dst.numpy()
        return {key: (name + size, lambda: numpy.copyto(dst, src)) for key, name in names.items()}

    dev_src = host_src.to(device)
    dev_dst = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    pinned = host_src.pin_memory()

    def pinned_to_device():
        dev_dst.copy_(pinned, non_blocking=True)
        torch.openreg.synchronize()

    fns = {
        "h2d": lambda: dev_dst.copy_(host_src),
        "d2h": lambda: host_dst.copy_(dev_src),
        "d2d": lambda: dev_dst.copy_(dev_src),
        "pinned_h2d": pinned_to_device,
    }
    return {key: (name + size, fns[key]) for key, name in names.items()}


def amp_cases(torch, device, quick):
    """The MLP training step with its forward under bfloat16 autocast, on each device."""
    nn = torch.nn
    torch.manual_seed(0)
    labels = torch.randint(0, 10, (128,))
    step = training_step(torch, mlp(nn).to(device), torch.randn(128, 784).to(device), labels.to(device))

    def autocast_step():
        with torch.autocast(device, dtype=torch.bfloat16):
            step()

    return {"mlp_bf16": ("MLP 784-512-512-10, batch 128, bf16 autocast", autocast_step)}


def autocast_cost_cases(torch, device, quick):
    """Operators outside the lists, in an openreg autocast region, enabled on the
    openreg side and disabled on the other (both on openreg): the cost of the
    AutocastPrivateUse1 fallthrough."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, generator=g).to("openreg")
    b = torch.randn(16, generator=g).to("openreg")
    enabled = device == "openreg"

    def repeated(op):
        def run():
            with torch.autocast("openreg", enabled=enabled):
                for _ in range(100):
                    op()

        return run

    return {
        "add": ("add (stub kernel), 16 elements", repeated(lambda: a + b)),
        "relu": ("relu (fallback), 16 elements", repeated(lambda: torch.relu(a))),
    }


BUILDERS = {
    "small": small_cases,
    "large": large_cases,
    "training": training_cases,
    "churn": churn_cases,
    "copies": copy_cases,
    "amp": amp_cases,
    "autocast_cost": autocast_cost_cases,
    "compiled": compiled_training_cases,
    "compile_time": compile_time_cases,
    "optimizer": optimizer_cases,
}
