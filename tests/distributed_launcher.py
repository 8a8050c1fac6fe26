"""Runs a worker script as the ranks of one job, the way torchrun starts them, for multi-process tests.

Each rank is a subprocess with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1, MASTER_PORT), gloo bound to the loopback interface, and enough openreg devices for
one device per rank. A worker reports what it found by printing ``RESULT <json>`` lines; the launcher
returns them per rank. Ranks are judged by what they report, not by their exit code alone: two-process
gloo jobs of torch 2.13 itself sometimes abort at interpreter exit after finishing their work
(docs/distributed.md). Every wait is bounded: on timeout every rank still running is killed and the test
fails with each rank's output.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RESULT_PREFIX = "RESULT "


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Rank:
    rank: int
    returncode: int | None
    output: str
    results: list = field(default_factory=list)

    def result(self, key: str):
        """The value of the last ``RESULT`` object that has ``key``."""
        for result in reversed(self.results):
            if key in result:
                return result[key]
        raise AssertionError(f"rank {self.rank} reported no {key!r}; its output:\n{self.output}")


def report(**values) -> None:
    """Called by a worker: one result line for the launcher."""
    print(RESULT_PREFIX + json.dumps(values), flush=True)


def run_ranks(
    script: str | Path,
    world_size: int,
    args: tuple = (),
    timeout: float = 240.0,
    env: dict | None = None,
    expect_killed: tuple = (),
) -> list[Rank]:
    """Runs ``python script *args`` as ranks 0..world_size-1 and returns what each reported.

    Raises if a rank outside ``expect_killed`` reports nothing, or if the job outlives ``timeout``.
    """
    base = dict(os.environ)
    base.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        GLOO_SOCKET_IFNAME="lo",
        OPENREG_DEVICE_COUNT=str(max(2, world_size)),
        OMP_NUM_THREADS="1",
    )
    base.update(env or {})
    procs, logs = [], []
    for rank in range(world_size):
        log = tempfile.TemporaryFile(mode="w+")
        rank_env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(Path(script).resolve()), *map(str, args)],
                env=rank_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tempfile.gettempdir(),
                start_new_session=True,
            )
        )
        logs.append(log)
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    ranks = []
    for rank, (proc, log) in enumerate(zip(procs, logs)):
        log.seek(0)
        output = log.read()
        log.close()
        results = [
            json.loads(line[len(RESULT_PREFIX) :]) for line in output.splitlines() if line.startswith(RESULT_PREFIX)
        ]
        ranks.append(Rank(rank, proc.returncode, output, results))
    outputs = "\n".join(f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output}" for r in ranks)
    if timed_out:
        raise AssertionError(f"{script} did not finish within {timeout} s; killed. Outputs:\n{outputs}")
    for r in ranks:
        if not r.results and r.rank not in expect_killed:
            raise AssertionError(f"rank {r.rank} reported nothing. Outputs:\n{outputs}")
    return ranks
