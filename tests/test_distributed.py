"""torch.distributed on openreg: the orccl backend (docs/distributed.md).

Each test runs one multi-process job (tests/distributed_launcher.py) whose ranks report what they found;
many operations are batched into one job, since starting processes and importing torch dominate the cost.
"""
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from distributed_launcher import run_ranks

WORKERS = Path(__file__).parent / "distributed_workers"


def test_registered_for_openreg():
    from torch_openreg._C import ProcessGroupOpenReg

    assert "orccl" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["openreg"] == "orccl"
    assert dist.Backend.backend_capability["orccl"] == ["openreg"]
    assert dist.get_default_backend_for_device("openreg") == "orccl"
    # A c10d Backend, as register_backend's creators must return.
    assert issubclass(ProcessGroupOpenReg, torch._C._distributed_c10d.Backend)
    assert ProcessGroupOpenReg.NAME == "orccl"



def test_every_operation_matches_gloo_on_cpu():
    ranks = run_ranks(WORKERS / "collectives.py", 4)
    for r in ranks:
        assert r.result("failures") == {}, f"rank {r.rank}"
        assert r.result("backend") == "orccl"
    checked = ranks[0].result("checked")
    # Every ReduceOp gloo has for dense tensors, 7 dtypes, and every other operation.
    assert len([c for c in checked if c.startswith("all_reduce RedOpType")]) == 4 * 7 + 3
    for name in ("broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                 "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
                 "barrier, monitored_barrier", "send, recv, isend, irecv", "batch_isend_irecv", "coalesced forms",
                 "object collectives", "DeviceMesh"):
        assert name in checked
    # The odd and the even ranks each ran their sub-group's check.
    assert "new_group [0, 2]" in ranks[0].result("checked") and "new_group [1, 3]" in ranks[1].result("checked")


def test_init_as_under_torchrun():
    ranks = run_ranks(WORKERS / "init_styles.py", 2)
    for r in ranks:
        styles = {result["style"]: result for result in r.results}
        assert set(styles) == {"None", "orccl", "cpu:gloo,openreg:orccl"}
        for style, result in styles.items():
            # Each rank binds openreg:LOCAL_RANK; orccl serves openreg and is the group's default backend.
            assert result["current_device"] == r.rank and result["device"] == f"openreg:{r.rank}", style
            assert result["openreg_backend"] == "ProcessGroupOpenReg", style
            assert result["group_name"] == "custom", style
            assert result["all_reduce"] == [3.0] * 4, style
        assert styles["None"]["device_types"] == ["openreg"]
        assert styles["cpu:gloo,openreg:orccl"]["device_types"] == ["cpu", "openreg"]
        assert styles["cpu:gloo,openreg:orccl"]["cpu_all_reduce"] == [3.0, 3.0]
