"""Runs jobs in worker subprocesses, one case at a time, surviving crashes and hangs.

Workers are started with ``subprocess`` (a fresh interpreter, never a fork),
so the parent may have imported anything. When a worker dies or a case
exceeds the timeout, the case in flight is recorded as a failure, the worker
is replaced, and the job resumes with its next case.
"""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

STDERR_TAIL_LINES = 12
STARTUP_TIMEOUT = 300
# torch first: the backend registers itself through torch's autoload.
WORKER_MAIN = "import torch; from torch_openreg.testing.worker import main; main()"


class WorkerStartError(RuntimeError):
    """No worker could load torch and the backend."""


def start_worker():
    """A worker that has loaded torch and the backend; a worker that cannot
    (a broken install) is an error for the whole run, not for one case."""
    worker = Worker()
    if worker.next_event(STARTUP_TIMEOUT) == {"event": "ready"}:
        return worker
    reason = worker.death_reason(STARTUP_TIMEOUT)
    worker.stop()
    raise WorkerStartError(f"a test worker could not load torch and torch_openreg: {reason.strip()}")


class Worker:
    """One worker process and its line-oriented event pipe."""

    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+b")
        # -P: the caller's working directory (a source checkout, say) must not
        # shadow the installed torch_openreg.
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", WORKER_MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.buffer = b""

    def send(self, job):
        self.process.stdin.write((json.dumps(job) + "\n").encode())
        self.process.stdin.flush()

    def next_event(self, timeout):
        """The next event, or None if the worker exited or stayed silent for ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def death_reason(self, timeout):
        """Why the worker stopped answering: its exit status (waiting briefly) or the timeout."""
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return f"timeout: no result within {timeout:g} s"
        if code < 0:
            return f"crash: worker killed by {signal.Signals(-code).name}{self._stderr_tail()}"
        return f"crash: worker exited with status {code}{self._stderr_tail()}"

    def _stderr_tail(self):
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()[-STDERR_TAIL_LINES:]
        return "\n" + "\n".join(lines) if lines else ""

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def run_jobs(jobs, timeout, record):
    """Runs every job; calls ``record(job, case)`` for each case result, then ``record(job, None)``."""
    worker = None
    try:
        for job in jobs:
            skip = 0
            while skip is not None:
                if worker is None:
                    worker = start_worker()
                worker.send({**job, "skip": skip})
                skip, healthy = _follow(worker, job, timeout, record)
                if not healthy:
                    worker.stop()
                    worker = None
            record(job, None)
    finally:
        if worker is not None:
            worker.close()


def _follow(worker, job, timeout, record):
    """Reads one job's events; returns ``(position to resume at or None, worker still usable)``."""
    in_flight = None
    while True:
        event = worker.next_event(timeout)
        if event is None:
            reason = worker.death_reason(timeout)
            if in_flight is None:
                record(
                    job, {"variant": "setup", "sample": None, "status": "failed", "message": reason, "seconds": None}
                )
                return None, False
            record(job, {**in_flight, "status": "failed", "message": reason, "seconds": None})
            return in_flight["position"] + 1, False
        kind = event.pop("event")
        if kind == "begin":
            in_flight = event
        elif kind == "end":
            record(job, {**in_flight, **event})
            in_flight = None
        elif kind == "error":
            record(
                job,
                {"variant": "setup", "sample": None, "status": "failed", "message": event["message"], "seconds": None},
            )
        elif kind == "done":
            return None, True
