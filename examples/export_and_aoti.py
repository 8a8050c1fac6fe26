"""Exports a small transformer with a custom operator inside, compiles it ahead of time for openreg with
AOTInductor, and runs the package in a fresh process, against the eager CPU model.

The model is the transformer of compile_training.py with its logits passed through openreg's custom operator
``openreg_py::smooth_clamp``. Its weights and example input live on openreg; ``torch.export.export`` traces it,
``torch._inductor.aoti_compile_and_package`` compiles the program into a ``.pt2`` package (C++ wrapper, Inductor's
kernels, the custom operator called through the dispatcher), and a second Python process, which knows nothing of the
model's code, loads the package with ``torch._inductor.aoti_load_package`` and runs it on openreg. The same program
compiled for the CPU runs there too. The script prints the largest difference of the openreg package from the eager
CPU model (it must be within Inductor's float32 test tolerance, rtol 1.3e-5 and atol 1.5e-5, docs/compile.md) and
from the CPU package (it must be 0: the same generated code), and exits 1 otherwise.

    python examples/export_and_aoti.py [--keep DIRECTORY]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import torch
from compile_training import ATOL, RTOL, SmallTransformer, token_batches
from torch import nn

RUN_PACKAGES = """
import sys, torch
packages, tokens_path, outputs_path = sys.argv[1:]
tokens = torch.load(tokens_path)
outputs = {}
with torch.no_grad():
    for device, package in zip(("openreg", "cpu"), packages.split(",")):
        model = torch._inductor.aoti_load_package(package)
        outputs[device] = model(tokens.to(device)).cpu()
torch.save(outputs, outputs_path)
"""


class ClampedTransformer(nn.Module):
    """The example transformer whose logits go through a custom operator."""

    def __init__(self):
        super().__init__()
        self.transformer = SmallTransformer()

    def forward(self, tokens):
        return torch.ops.openreg_py.smooth_clamp(self.transformer(tokens), -4.0, 4.0)


def compile_package(model, tokens, path):
    with torch.no_grad():
        program = torch.export.export(model, (tokens,))
        return torch._inductor.aoti_compile_and_package(program, package_path=path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIRECTORY", help="write the packages there and keep them")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = ClampedTransformer().eval()
    tokens, _ = next(token_batches(1))
    with torch.no_grad():
        expected = model(tokens)

    with tempfile.TemporaryDirectory() as scratch:
        directory = args.keep or scratch
        os.makedirs(directory, exist_ok=True)
        device_model = ClampedTransformer().to("openreg").eval()
        device_model.load_state_dict(model.state_dict())
        packages = [
            compile_package(device_model, tokens.to("openreg"), os.path.join(directory, "transformer_openreg.pt2")),
            compile_package(model, tokens, os.path.join(directory, "transformer_cpu.pt2")),
        ]
        print(f"packages: {', '.join(packages)}")
        tokens_path, outputs_path = os.path.join(scratch, "tokens.pt"), os.path.join(scratch, "outputs.pt")
        torch.save(tokens, tokens_path)
        subprocess.run(
            [sys.executable, "-c", RUN_PACKAGES, ",".join(packages), tokens_path, outputs_path], check=True, timeout=600
        )
        outputs = torch.load(outputs_path)

    from_eager = (outputs["openreg"] - expected).abs().max().item()
    from_cpu_package = (outputs["openreg"] - outputs["cpu"]).abs().max().item()
    print(f"openreg package vs eager CPU model: largest difference {from_eager:.3g}")
    print(f"openreg package vs CPU package:     largest difference {from_cpu_package:.3g}")
    if not torch.allclose(outputs["openreg"], expected, rtol=RTOL, atol=ATOL) or from_cpu_package != 0:
        print("mismatch")
        return 1
    print("match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
