"""torch.export on openreg: models whose parameters and inputs live on openreg
export, run from the ExportedProgram bit for bit as the eager CPU model, and
round-trip through torch.export.save / load; custom operators stay opaque
nodes of the exported graph, also after run_decompositions().

Exporting traces with fake tensors and runs nothing on the device; only the
programs' runs do. No C++ compiler is involved."""

import copy
import io
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from conftest import DEVICE, assert_same, check_ok, make_cpu, run_python

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from compile_training import SEQUENCE, VOCABULARY, SmallCNN, SmallTransformer  # noqa: E402


class CustomOps(nn.Module):
    """Every operator of the `openreg` (C++) and `openreg_py` (Python) namespaces: functional, view, out= and
    mutating ones."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.ops.openreg.custom_abs(self.linear(x))
        y = torch.ops.openreg.scaled_tanh(y, 0.5)
        y = torch.ops.openreg_py.smooth_clamp(y, -0.3, 0.4)
        flat = torch.ops.openreg.flat_view(y)
        out = torch.empty_like(y)
        torch.ops.openreg.custom_abs.out(y - 0.1, out=out)
        tanh_out = torch.empty_like(y)
        torch.ops.openreg.scaled_tanh.out(out, 2.0, out=tanh_out)
        total = torch.zeros(8, device=x.device)
        torch.ops.openreg_py.accumulate_(total, y.sum(0), 0.5)
        return flat.sum() + out + tanh_out + total


class ExtraOps(nn.Module):
    """The operators of the loadable library (`openreg_extra`, csrc/extra_ops/), which only a process that loaded
    it knows."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        normed = torch.ops.openreg_extra.rms_norm(self.linear(x), 1e-5)
        return normed + torch.ops.openreg_extra.pairwise_distance_sq(normed, x).sum(1, keepdim=True)


def models():
    torch.manual_seed(0)
    return {
        "cnn": (SmallCNN().eval(), lambda: (make_cpu((4, 1, 16, 16)),)),
        "mlp": (
            nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)),
            lambda: (make_cpu((5, 12)),),
        ),
        "transformer": (
            SmallTransformer().eval(),
            lambda: (make_cpu((2, SEQUENCE), torch.int64, low=0, high=VOCABULARY - 1),),
        ),
        "custom_ops": (CustomOps(), lambda: (make_cpu((3, 8)),)),
        "extra_ops": (ExtraOps(), lambda: (make_cpu((3, 8)),)),
    }


EXPORTED_EXTRA = {"openreg_extra.rms_norm.default", "openreg_extra.pairwise_distance_sq.default"}
EXPORTED = {
    "openreg.custom_abs.default",
    "openreg.scaled_tanh.default",
    "openreg_py.smooth_clamp.default",
    "openreg.flat_view.default",
    "openreg.custom_abs.out",
    "openreg.scaled_tanh.out",
    "openreg_py.accumulate_.default",
}
# run_decompositions() functionalizes: the out= and mutating operators are kept inside auto_functionalized;
# flat_view, whose only kernel is CompositeImplicitAutograd, is replaced by its decomposition.
DECOMPOSED = EXPORTED - {"openreg.flat_view.default"}
# The custom-operator models: their custom nodes after export, and after run_decompositions().
CUSTOM_NODES = {"custom_ops": (EXPORTED, DECOMPOSED), "extra_ops": (EXPORTED_EXTRA, EXPORTED_EXTRA)}


def custom_nodes(program):
    targets = set()
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if "auto_functionalized" in str(target):
            target = node.args[0]
        if str(target).startswith("openreg"):
            targets.add(str(target))
    return targets


def check_export(name):
    """Exports model `name` with its parameters and inputs on openreg and checks the program, its save/load round
    trip and (for the custom-operator models) its graph against the eager CPU model."""
    model, make_args = models()[name]
    device_model = copy.deepcopy(model).to(DEVICE)
    expected = model(*make_args())
    program = torch.export.export(device_model, tuple(a.to(DEVICE) for a in make_args()))
    assert_same(program.module()(*(a.to(DEVICE) for a in make_args())), expected)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    assert all(p.device.type == DEVICE for p in loaded.state_dict.values())
    assert_same(loaded.module()(*(a.to(DEVICE) for a in make_args())), expected)
    if name in CUSTOM_NODES:
        exported, kept_by_decompositions = CUSTOM_NODES[name]
        assert custom_nodes(program) == exported
        assert custom_nodes(loaded) == exported
        decomposed = program.run_decompositions()
        assert custom_nodes(decomposed) == kept_by_decompositions
        assert_same(decomposed.module()(*(a.to(DEVICE) for a in make_args())), expected)


@pytest.mark.parametrize("name", ["cnn", "mlp", "transformer", "custom_ops"])
def test_exported_program_runs_on_openreg_as_the_cpu_model_does(name):
    check_export(name)


@pytest.mark.slow
def test_loadable_library_operators_survive_export():
    # A fresh process: loading the library here would register its operators in the pytest process.
    code = f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        import torch, torch_openreg
        torch.ops.load_library(torch_openreg.extra_ops_path())
        from test_export import check_export
        check_export("extra_ops")
        print("exported")
    """
    assert check_ok(run_python(code)).splitlines()[-1] == "exported"
