"""The worker process: runs the cases of the jobs it reads, reporting each one as it goes.

Started by ``runner`` in a fresh interpreter (``runner.WORKER_MAIN``). It reads
one JSON job per line on stdin and writes JSON events on what was its stdout
(fd 1 itself is redirected to stderr, so output of the code under test cannot
corrupt the protocol): ``begin`` and ``end`` around each case, ``error`` if
the job itself fails, ``done`` after the job; ``ready`` once at start, when torch
and the backend are loaded.
"""

import importlib
import json
import os
import sys
import time
import traceback
import warnings

MESSAGE_LIMIT = 2000


def _suite(job):
    """The module that defines the job's cases: ``job["module"]``, or the suite of that name here."""
    return importlib.import_module(job.get("module") or f"torch_openreg.testing.{job['suite']}")


def run_check(check):
    """``(status, message)`` of one check."""
    from .checks import SkipCase

    try:
        check()
        return "passed", ""
    except SkipCase as skip:
        return "skipped", str(skip)
    except Exception as error:  # noqa: BLE001 - every error is a reported failure
        return "failed", describe(error)


def describe(error):
    """Exception type, message and the innermost frame, truncated."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" [{frames[-1].filename}:{frames[-1].lineno}]" if frames else ""
    text = f"{type(error).__name__}: {error}".strip()
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT] + " ..."
    return text + where


def run_job(job, send):
    """Runs the cases of ``job`` after the first ``job["skip"]``."""
    position = 0
    try:
        for variant, sample, check in _suite(job).iter_cases(job):
            if position >= job["skip"]:
                send({"event": "begin", "position": position, "variant": variant, "sample": sample})
                started = time.perf_counter()
                status, message = run_check(check)
                seconds = round(time.perf_counter() - started, 3)
                send({"event": "end", "position": position, "status": status, "message": message, "seconds": seconds})
            position += 1
    except Exception as error:  # noqa: BLE001 - a failing job is reported, the worker goes on
        send({"event": "error", "position": position, "message": describe(error)})
    send({"event": "done"})


def main():
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    warnings.simplefilter("ignore")

    def send(event):
        protocol.write(json.dumps(event) + "\n")
        protocol.flush()

    import torch  # noqa: F401 - fails here, before ``ready``, if the backend cannot load

    send({"event": "ready"})
    for line in sys.stdin:
        run_job(json.loads(line), send)


if __name__ == "__main__":
    main()
