"""torch.distributed on openreg: the orccl backend (docs/distributed.md).

Each test runs one multi-process job (tests/distributed_launcher.py) whose ranks report what they found;
many operations are batched into one job, since starting processes and importing torch dominate the cost.
"""

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conftest import run_python
from distributed_launcher import free_port, run_ranks

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


def test_backend_checks_the_gloo_group_it_is_given():
    from datetime import timedelta

    from torch_openreg._C import ProcessGroupOpenReg

    store = dist.HashStore()
    gloo = dist.ProcessGroupGloo(store, 0, 1, timedelta(seconds=10))
    with pytest.raises(ValueError, match="orccl: the gloo backend is rank 0 of 1, not rank 0 of 2"):
        ProcessGroupOpenReg(store, gloo, 0, 2)
    backend = ProcessGroupOpenReg(store, gloo, 0, 1)
    assert backend.gloo is gloo and backend.name() == "orccl" and backend.size() == 1


@pytest.mark.slow
def test_bad_launch_settings_raise_clearly():
    # A single-rank job: gloo options of the wrong type, then a local rank without a device.
    result = run_python(
        """
        import torch, torch.distributed as dist
        try:
            dist.init_process_group("orccl", pg_options=object())
        except TypeError as error:
            print("OPTIONS:", error)
        try:
            dist.init_process_group()
        except RuntimeError as error:
            print("DEVICES:", error)
        """,
        RANK=0,
        LOCAL_RANK=5,
        WORLD_SIZE=1,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=free_port(),
        OPENREG_DEVICE_COUNT=2,
        GLOO_SOCKET_IFNAME="lo",
    )
    assert (
        "DEVICES: orccl: this process is local rank 5 but only 2 openreg devices exist; set "
        "OPENREG_DEVICE_COUNT" in result.stdout
    ), result.stdout + result.stderr
    assert (
        "OPTIONS: orccl: pg_options must be a torch.distributed.ProcessGroupGloo._Options, got object" in result.stdout
    ), result.stdout + result.stderr


@pytest.mark.slow
def test_every_operation_matches_gloo_on_cpu():
    ranks = run_ranks(WORKERS / "collectives.py", 4)
    for r in ranks:
        assert r.result("failures") == {}, f"rank {r.rank}"
        assert r.result("backend") == "orccl"
    checked = ranks[0].result("checked")
    # Every ReduceOp gloo has for dense tensors, 7 dtypes, and every other operation.
    assert len([c for c in checked if c.startswith("all_reduce RedOpType")]) == 4 * 7 + 3
    for name in (
        "broadcast",
        "reduce",
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "gather",
        "scatter",
        "barrier, monitored_barrier",
        "send, recv, isend, irecv",
        "batch_isend_irecv",
        "coalesced forms",
        "object collectives",
        "DeviceMesh",
        "all_reduce after work queued on the current stream",
        "async collectives issued back to back",
        "async all_reduce, tensor dropped before wait, future continuation",
        "all_reduce AVG as gloo",
        "all_reduce PREMUL_SUM raises as gloo does",
    ):
        assert name in checked
    # The odd and the even ranks each ran their sub-group's check.
    assert "new_group [0, 2]" in ranks[0].result("checked") and "new_group [1, 3]" in ranks[1].result("checked")


@pytest.mark.slow
def test_init_as_under_torchrun():
    ranks = run_ranks(WORKERS / "init_styles.py", 2, args=[free_port() for _ in range(5)])
    for r in ranks:
        styles = {result["style"]: result for result in r.results}
        assert set(styles) == {"None", "orccl", "cpu:gloo,openreg:orccl", "device_id", "pg_options"}
        assert styles["pg_options"]["gloo_threads"] == 1 and styles["orccl"]["gloo_threads"] == 2
        for style, result in styles.items():
            # Each rank binds openreg:LOCAL_RANK; orccl serves openreg and is the group's default backend.
            assert result["current_device"] == r.rank and result["device"] == f"openreg:{r.rank}", style
            assert result["openreg_backend"] == "ProcessGroupOpenReg", style
            assert result["group_name"] == "custom", style
            assert result["all_reduce"] == [3.0] * 4, style
        assert styles["None"]["device_types"] == ["openreg"]
        assert styles["device_id"]["backend"] == "orccl" and styles["device_id"]["bound_device"] == f"openreg:{r.rank}"
        assert styles["cpu:gloo,openreg:orccl"]["device_types"] == ["cpu", "openreg"]
        assert styles["cpu:gloo,openreg:orccl"]["cpu_all_reduce"] == [3.0, 3.0]


def assert_mismatch_error(rank, case, result, shown):
    """`result` (one worker case) is the agreement's ValueError on `rank`, naming the ranks' arguments `shown`."""
    assert result["error"] == "ValueError", (rank, case, result)
    assert f"on rank {rank}: the ranks passed different arguments" in result["message"], case
    assert shown in result["message"], (case, result["message"])


@pytest.mark.slow
def test_arguments_that_differ_across_ranks_or_devices_raise_on_every_rank():
    ranks = run_ranks(WORKERS / "faults.py", 2, args=("mismatch",))
    for r in ranks:
        cases = {result["case"]: result for result in r.results if "case" in result}
        for case, shown in (
            ("numel", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Float[1004])"),
            ("async numel", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Float[1004])"),
            ("async numel future", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Float[1004])"),
            ("dtype", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Double[4])"),
            ("shape", "Float[2, 3]), rank 1: ALLREDUCE(reduce_op=0; Float[3, 2])"),
            ("root", "BROADCAST(root=0; Float[4]), rank 1: BROADCAST(root=1; Float[4])"),
            ("operation", "rank 0: ALLREDUCE(reduce_op=0; Float[4]), rank 1: BROADCAST(root=0; Float[4])"),
            ("all_gather input", "Float[3], Float[3], Float[3]), rank 1: ALLGATHER(; Float[4]"),
        ):
            assert_mismatch_error(r.rank, case, cases[case], shown)
        refusals = {
            "gather root list length": (
                0,
                "the root's output list holds 3 tensors; it must hold one per rank (2)",
                "rank 0: GATHER(root=0; Float[3]) (refused on that rank)",
            ),
            "gather root list shape": (
                0,
                "output 1 is Float[4], not Float[3]: every tensor of the list must have",
                "rank 0: GATHER(root=0; Float[3]) (refused on that rank)",
            ),
            "scatter root list length": (
                1,
                "the root's input list holds 1 tensors; it must hold one per rank (2)",
                "rank 1: SCATTER(root=1; Float[3]) (refused on that rank)",
            ),
            "all_to_all uneven": (
                1,
                "output 0 is Float[3], not Float[2]",
                "rank 1: ALLTOALL(; Float[3], Float[3], Float[2], Float[2]) (refused on that rank)",
            ),
        }
        for case, (refusing, reason, shown) in refusals.items():
            if r.rank == refusing:
                assert cases[case]["error"] == "ValueError", (case, cases[case])
                assert f"orccl {case.split()[0].replace('_', '')} on rank {r.rank}: {reason}" in cases[case]["message"]
            else:
                assert_mismatch_error(r.rank, case, cases[case], shown)
        # Every rank refuses its own lists alike: each raises its own reason, nothing reaches gloo.
        assert cases["all_to_all list length"]["error"] == "ValueError"
        assert (
            "the input and output lists hold 3 and 3 tensors; each must hold one per rank (2)"
            in cases["all_to_all list length"]["message"]
        )
        assert_mismatch_error(
            r.rank,
            "all_to_all sizes across ranks",
            cases["all_to_all sizes across ranks"],
            "rank 0: ALLTOALL(; Float[2], Float[2], Float[2], Float[2]), rank 1: ALLTOALL(; Float[3]",
        )
        assert cases["cpu tensor"]["error"] == "RuntimeError"
        assert "No backend type associated with device type cpu" in cases["cpu tensor"]["message"]
        assert cases["sparse tensor"]["error"] == "NotImplementedError"
        assert cases["sparse tensor"]["message"].startswith(
            "c10d::allreduce_: collectives on openreg take dense (strided) tensors, got SparsePrivateUse1 tensors"
        )
        other = f"openreg:{1 - r.rank}"
        assert (
            f"found at least two devices, openreg:{r.rank} and {other}! (when checking the arguments of allgather"
            in cases["two devices"]["message"]
        )
        assert f"openreg:{r.rank} and cpu!" in cases["cpu output"]["message"]
        assert r.result("async_before_peers") == [3.0] * 2
        assert r.result("queued_after_error") == [3.0] * 2
        # The group still works after every error.
        assert r.result("after_errors") == [3.0] * 3


@pytest.mark.slow
def test_repeated_calls_give_the_cpu_results_and_a_rank_leaving_them_raises_on_every_rank():
    ranks = run_ranks(WORKERS / "faults.py", 2, args=("repeated",))
    for r in ranks:
        cases = {result["case"]: result for result in r.results}
        for case in (
            "repeated",
            "all ranks leave the pattern",
            "repeated after the change",
            "after the errors",
            "after the refusals",
            "data with a NaN",
            "half and bfloat16 sums",
            "after the reduction error",
            "broadcast, all_gather_into_tensor, reduce_scatter_tensor",
        ):
            assert cases[case]["equal"] is True, (r.rank, case)
        for case, shown in (
            ("repeated numel", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Float[1004])"),
            ("repeated dtype", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Int[4])"),
            ("repeated async numel", "Float[4]), rank 1: ALLREDUCE(reduce_op=0; Float[1004])"),
            ("repeated async numel future", "Float[1004])"),
            ("repeated reduction", "Float[4]), rank 1: ALLREDUCE(reduce_op=4; Float[4])"),
        ):
            assert_mismatch_error(r.rank, case, cases[case], shown)
        # Every collective agrees first: one agreement allgather per all_reduce, floating-point or integer.
        works = cases["gloo works of six repeated calls"]
        assert (works["all_reduce"], works["all_gather"]) == (6, 6), works
        for i in range(3):
            refusal = cases[f"repeated refusal {i}"]
            assert refusal["error"] == "RuntimeError", refusal
            assert "ProcessGroupGloo::allgather: invalid tensor size" in refusal["message"], refusal


@pytest.mark.slow
def test_a_wait_that_times_out_raises_as_gloo_does_and_a_later_wait_completes():
    ranks = run_ranks(WORKERS / "faults.py", 2, args=("timeout",))
    cases = {result["case"]: result for result in ranks[0].results}
    for device in ("cpu", "openreg"):
        short_wait = cases[f"{device} short wait"]
        assert short_wait["error"] == "RuntimeError", (device, short_wait)
        assert short_wait["message"].startswith("Operation timed out!"), (device, short_wait)
        assert cases[f"{device} completed after the short wait"]["value"] is False, device
        assert cases[f"{device} later wait"]["value"] is True, device
    for r in ranks:
        results = {result["case"]: result["value"] for result in r.results if result["case"].endswith("result")}
        assert results == {"cpu result": [3.0] * 4, "openreg result": [3.0] * 4}, r.rank


@pytest.mark.slow
def test_a_killed_rank_makes_the_others_fail_naming_it():
    ranks = run_ranks(WORKERS / "faults.py", 3, args=("killed",), expect_killed=(1,))
    assert ranks[1].returncode == 17 and not ranks[1].results
    for r in (ranks[0], ranks[2]):
        assert r.result("error") == "DistBackendError", r.output
        message = r.result("message")
        assert f"orccl allreduce on rank {r.rank} (openreg:{r.rank}) failed" in message
        assert "rank 1 (process " in message and "is no longer running" in message
        assert r.result("seconds") < r.result("timeout")


@pytest.mark.slow
def test_collectives_refuse_tensors_gloo_would_read_past_and_point_to_point_stays_within_them():
    ranks = run_ranks(WORKERS / "layouts.py", 2)
    for r in ranks:
        cases = {result["case"]: result for result in r.results if "case" in result}
        # Each refusal raises before gloo runs and leaves the memory around the tensors as it was.
        refusals = {
            "all_reduce column": ("allreduce", "Float[4] tensor with strides [4]"),
            "all_reduce expanded": ("allreduce", "Float[64] tensor with strides [0]"),
            "broadcast": ("broadcast", "Float[4] tensor with strides [4]"),
            "reduce": ("reduce", "Float[4] tensor with strides [4]"),
            "all_gather input": ("allgather", "Float[4] tensor with strides [4]"),
            "all_gather_into_tensor input": ("allgather_into_tensor", "Float[4] tensor with strides [4]"),
            "all_gather_into_tensor output": ("allgather_into_tensor", "Float[8] tensor with strides [2]"),
            "reduce_scatter output": ("reduce_scatter", "Float[4] tensor with strides [4]"),
            "reduce_scatter_tensor input": ("reduce_scatter_tensor", "Float[8] tensor with strides [2]"),
            "reduce_scatter_tensor output": ("reduce_scatter_tensor", "Float[4] tensor with strides [4]"),
            "all_to_all_single": ("alltoall_base", "Float[4] tensor with strides [4]"),
            "all_to_all inputs": ("alltoall", "Float[4] tensor with strides [4]"),
            "all_to_all outputs": ("alltoall", "Float[4] tensor with strides [4]"),
            "gather input": ("gather", "Float[4] tensor with strides [4]"),
            "scatter output": ("scatter", "Float[4] tensor with strides [4]"),
            "coalesced all_gather_into_tensor": ("allgather_into_tensor_coalesced", "Float[8] tensor with strides [2]"),
            "async all_reduce": ("allreduce", "Float[4] tensor with strides [4]"),
        }
        for case, (op, tensor) in refusals.items():
            result = cases[case]
            assert result["error"] == "ValueError" and result["untouched"], (r.rank, case, result)
            assert (
                f"orccl {op} on rank {r.rank}: Tensors must be contiguous, as NCCL requires: got a {tensor}"
                in result["message"]
            ), (r.rank, case, result["message"])
        dense = cases["all_reduce_coalesced expanded"]
        assert dense["error"] == "ValueError" and dense["untouched"], dense
        assert (
            f"orccl allreduce_coalesced on rank {r.rank}: Tensors must be non-overlapping and dense, as NCCL "
            "requires: got a Float[64] tensor with strides [0]" in dense["message"]
        )
        # The root refuses its own list; the other rank, which passed none, raises the agreement's error.
        for case, op, shown in (
            ("gather root outputs", "gather", "rank 0: GATHER(root=0; Float[4]) (refused on that rank)"),
            ("scatter root inputs", "scatter", "rank 0: SCATTER(root=0; Float[4]) (refused on that rank)"),
            ("one rank", "allreduce", "rank 0: ALLREDUCE(reduce_op=0; Float[4]) (refused on that rank)"),
        ):
            if r.rank == 0:
                assert "Tensors must be contiguous, as NCCL requires" in cases[case]["message"], cases[case]
            else:
                assert_mismatch_error(r.rank, case, cases[case], shown)
            assert cases[case]["untouched"], (r.rank, case)
        assert_mismatch_error(
            r.rank,
            "memory formats differ",
            cases["memory formats differ"],
            "rank 0: ALLREDUCE(reduce_op=0; Float[1, 4, 2, 2] ChannelsLast), rank 1: ALLREDUCE(reduce_op=0; "
            "Float[1, 4, 2, 2])",
        )
        # Dense channels-last tensors, and any layout in the lists gloo copies, give the right values.
        channels_last = [2.0 * v + 1 for v in range(16)]
        assert cases["all_reduce channels_last"]["value"] == [channels_last, [16, 1, 8, 4]]
        assert cases["all_reduce_coalesced transposed"]["value"] == [[1.0, 5.0, 9.0], [3.0, 7.0, 11.0]]
        assert cases["all_gather column outputs"]["value"] == [[v, 0.0, 10.0 + v] for v in range(4)]
        assert cases["reduce_scatter column inputs"]["value"] == [
            2 * v + 100 + 100 * r.rank for v in (1.0, 5.0, 9.0, 13.0)
        ]
        assert cases["reduce_scatter column inputs"]["untouched"]
        # Point-to-point: NCCL's warning once, values through dense copies, nothing outside the tensors.
        assert r.output.count("Detected non-contiguous tensor in P2P operations") == 1, r.output
        assert cases["send expanded"]["untouched"] and cases["batch_isend_irecv, irecv columns"]["untouched"]
        peer_column = [1001.0 + 100 * (1 - r.rank) + 4 * i for i in range(4)]
        received, received_after = cases["batch_isend_irecv, irecv columns"]["value"]
        assert received == peer_column
        if r.rank == 1:
            assert cases["send/recv columns"]["value"] == [[1.0, 5.0, 9.0, 13.0], True]
            assert cases["send expanded"]["value"] == [127.0]
            assert received_after == peer_column
            overlap = cases["recv into expanded"]
            assert overlap["error"] == "ValueError" and overlap["untouched"], overlap
            assert (
                "orccl recv on rank 1: a Float[64] tensor with strides [0] cannot receive a message: some of its "
                "elements share memory" in overlap["message"]
            )
        assert r.result("after") == [2.0] * 3
