"""``torch.compile(fn, backend="openreg")``: a Dynamo backend by the device's name.

Dynamo finds backends that packages declare under the ``torch_dynamo_backends``
entry-point group (pyproject.toml) when a backend name it does not know is
asked for, or ``torch._dynamo.list_backends()`` is called: nothing is imported
before then. The backend is Inductor, the default backend, which compiles
openreg graphs with the CPU's C++ code generator (docs/compile.md): a vendor's
own graph compiler would go here instead. ``mode=`` and ``options=`` mean what
they mean for ``backend="inductor"``.

Its graphs must be openreg graphs: a tensor input on another device (a model
left on the CPU) raises, instead of quietly compiling for that device.
"""

import torch

_DEVICE = "openreg"


def openreg(gm, example_inputs, mode=None, options=None):
    elsewhere = sorted(
        {
            str(t.device)
            for t in example_inputs
            if isinstance(t, torch.Tensor)
            and t.device.type != _DEVICE
            and not (t.device.type == "cpu" and t.dim() == 0)
        }
    )
    if elsewhere:
        raise ValueError(
            f"torch.compile(backend={_DEVICE!r}) compiles graphs whose tensors are on {_DEVICE}; this graph has "
            f"inputs on {', '.join(elsewhere)} (move them to {_DEVICE}, or use the default backend)"
        )
    # The wrapper torch.compile builds for backend="inductor": it applies the
    # mode's and the options' Inductor configuration around compile_fx.
    inductor = torch._TorchCompileInductorWrapper(mode, options, dynamic=None)
    return inductor(gm, example_inputs)
