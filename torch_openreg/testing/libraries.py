"""Libraries' own test suites on openreg: each library's device switch, and the CPU/openreg comparison.

    python -m torch_openreg.testing libraries list
    python -m torch_openreg.testing libraries env transformers     # export lines (writes the device spec file)
    python -m torch_openreg.testing libraries compare timm tests/test_layers.py -k drop

``compare`` runs pytest twice on the same selection (every argument after the
library's name is pytest's), first with the library's switch set to the CPU,
then to openreg, each in a fresh interpreter with ``library_plugin`` recording
every test's outcome, and lists the tests whose outcome differs: above all those
that pass on the CPU and fail on openreg (the exit status is 1 when there is
one). docs/libraries.md gives the line for each library and what is expected to
differ.
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

from .placement import DEVICE

SPEC_MODULE = "torch_openreg.testing.device_spec"
# The file `env` writes and the plugin loads: the suites' loaders import a spec by its path less ".py".
SPEC_FILE = f"{DEVICE}_device_spec.py"


@dataclasses.dataclass(frozen=True)
class Library:
    switch: dict  # variable -> value for openreg; empty: the suite has no device switch
    cpu: dict  # variable -> value for the CPU run (None: unset, the suite's own default)
    spec_variable: str = ""  # the variable naming a device spec file (device_spec.py), if the suite reads one
    note: str = ""  # how the suite is run on openreg, or why it cannot be


LIBRARIES = {
    "timm": Library(
        switch={"TORCH_DEVICE": DEVICE},
        cpu={"TORCH_DEVICE": "cpu"},
        note="tests/test_models.py, test_layers.py, test_optim.py read TORCH_DEVICE when imported",
    ),
    "transformers": Library(
        switch={"TRANSFORMERS_TEST_DEVICE": DEVICE},
        cpu={"TRANSFORMERS_TEST_DEVICE": "cpu", "TRANSFORMERS_TEST_DEVICE_SPEC": None},
        spec_variable="TRANSFORMERS_TEST_DEVICE_SPEC",
        note="testing_utils reads TRANSFORMERS_TEST_DEVICE and the spec (seeding, cache, device count)",
    ),
    "diffusers": Library(
        switch={"DIFFUSERS_TEST_DEVICE": DEVICE},
        cpu={"DIFFUSERS_TEST_DEVICE": "cpu", "DIFFUSERS_TEST_DEVICE_SPEC": None},
        spec_variable="DIFFUSERS_TEST_DEVICE_SPEC",
        note="its tests' testing_utils reads DIFFUSERS_TEST_DEVICE and the spec (also memory functions)",
    ),
    "accelerate": Library(
        switch={"ACCELERATE_TORCH_DEVICE": DEVICE},
        cpu={"ACCELERATE_TORCH_DEVICE": None},
        note="PartialState takes its device from ACCELERATE_TORCH_DEVICE, over cpu=True too (docs/libraries.md)",
    ),
    "lightning": Library(
        switch={},
        cpu={},
        note="no device switch: its device tests name cuda under RunIf(min_cuda_gpus=...); tests/test_lightning.py",
    ),
    "torchvision": Library(
        switch={},
        cpu={},
        note="no device switch: its tests parametrize over cpu_and_cuda() (test/common_utils.py)",
    ),
}


def _library(name):
    if name not in LIBRARIES:
        raise SystemExit(f"unknown library {name!r}; known: {', '.join(LIBRARIES)}")
    library = LIBRARIES[name]
    if not library.switch:
        raise SystemExit(f"{name}'s test suite has no device switch to set: {library.note}")
    return library


def write_spec(directory):
    """Writes ``SPEC_FILE`` (one line importing device_spec) into ``directory``; returns its path."""
    path = os.path.join(directory, SPEC_FILE)
    with open(path, "w") as file:
        file.write(f"from {SPEC_MODULE} import *  # noqa: F401,F403  (written by torch_openreg)\n")
    return path


def switch_environment(name, run=DEVICE):
    """The variables to set (value) and unset (None) for ``run`` ("cpu" or openreg), spec file aside."""
    library = _library(name)
    return dict(library.cpu) if run == "cpu" else dict(library.switch)


def apply_switch(name, run=DEVICE):
    """Sets the switch in this process's environment, before the suite is imported. For a suite that reads a device
    spec (transformers' and diffusers' own modules read it when they are imported, in the suite's process and in the
    processes its tests start), also writes ``SPEC_FILE`` into the working directory unless one is there (the
    readers accept only a file name there), names it in the spec variable and puts the directory on sys.path.
    Returns a function that removes the file again if it was written here."""
    for variable, value in switch_environment(name, run).items():
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    library = LIBRARIES[name]
    if run == "cpu" or not library.spec_variable:
        return lambda: None
    directory = os.getcwd()
    path = os.path.join(directory, SPEC_FILE)
    written = not os.path.exists(path)
    if written:
        write_spec(directory)
    os.environ[library.spec_variable] = SPEC_FILE
    if directory not in sys.path:
        sys.path.insert(0, directory)

    def remove_spec_file():
        if written and os.path.exists(path):
            os.remove(path)

    return remove_spec_file


PYTEST_MAIN = "import sys, torch, pytest; sys.exit(pytest.main(sys.argv[1:]))"
RUNS = ("cpu", DEVICE)


def run_suite(name, run, pytest_args, outcomes_path):
    """One pytest run of the selection with the switch set for ``run``; returns pytest's exit code."""
    # -P: the working directory (a library's checkout) must not shadow installed packages; pytest puts the
    # suite's own directories on sys.path as it always does.
    command = [sys.executable, "-P", "-c", PYTEST_MAIN, *pytest_args]
    command += ["-p", "torch_openreg.testing.library_plugin", "-p", "no:cacheprovider"]
    command += ["--openreg-library", name, "--openreg-run", run, "--openreg-outcomes", outcomes_path]
    return subprocess.run(command).returncode


def differences(outcomes):
    """``outcomes``: {run: {nodeid: {"status", "message"}}} for the CPU and openreg. Returns, by kind, the sorted
    nodeids whose outcome differs between the two runs (a nodeid one run did not collect has status "absent")."""
    cpu, device = outcomes["cpu"], outcomes[DEVICE]
    ran = {"passed", "failed"}
    kinds = {  # kind -> (statuses on the CPU, statuses on openreg)
        f"passed on cpu, failed on {DEVICE}": ({"passed"}, {"failed"}),
        f"failed on cpu, passed on {DEVICE}": ({"failed"}, {"passed"}),
        f"skipped on cpu, ran on {DEVICE}": ({"skipped"}, ran),
        f"ran on cpu, skipped on {DEVICE}": (ran, {"skipped"}),
        "collected on cpu only": (ran | {"skipped", "xfail"}, {"absent"}),
        f"collected on {DEVICE} only": ({"absent"}, ran | {"skipped", "xfail"}),
    }
    found = {kind: [] for kind in kinds}
    for nodeid in sorted(set(cpu) | set(device)):
        on_cpu = cpu.get(nodeid, {"status": "absent"})["status"]
        on_device = device.get(nodeid, {"status": "absent"})["status"]
        for kind, (cpu_statuses, device_statuses) in kinds.items():
            if on_cpu in cpu_statuses and on_device in device_statuses:
                found[kind].append(nodeid)
    return found


def counts_line(results):
    counts = Counter(result["status"] for result in results.values())
    return f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, {counts['xfail']} xfail"


def compare(name, pytest_args, report_path=None):
    """Runs the selection on the CPU, then on openreg; prints the counts and the differences. Exit status 1 when a
    test passed on the CPU and failed on openreg, or a run collected nothing."""
    _library(name)
    outcomes = {}
    with tempfile.TemporaryDirectory() as scratch:
        for run in RUNS:
            print(f"=== {name} on {run}: pytest {' '.join(pytest_args)}", flush=True)
            path = os.path.join(scratch, f"{run}.json")
            run_suite(name, run, pytest_args, path)
            if not os.path.exists(path):
                print(f"pytest did not run the {run} selection (see its output above)")
                return 1
            with open(path) as file:
                outcomes[run] = json.load(file)
    found = differences(outcomes)
    print(f"=== {name}: the same selection on the CPU and on {DEVICE}")
    for run in RUNS:
        print(f"{run}: {counts_line(outcomes[run])}")
    for kind, nodeids in found.items():
        print(f"{kind}: {len(nodeids)}")
        for nodeid in nodeids:
            message = outcomes[DEVICE].get(nodeid, {}).get("message") or outcomes["cpu"].get(nodeid, {}).get("message")
            print(f"  {nodeid}" + (f"  ({message})" if message else ""))
    if report_path:
        with open(report_path, "w") as file:
            json.dump({"library": name, "pytest_args": pytest_args, "outcomes": outcomes, "differences": found}, file)
    if not outcomes["cpu"] or not outcomes[DEVICE]:
        print("no test was collected")
        return 1
    return 1 if found[f"passed on cpu, failed on {DEVICE}"] else 0


def _print_environment(name):
    library = _library(name)
    exports = [f"{variable}={value}" for variable, value in library.switch.items()]
    if library.spec_variable:
        write_spec(os.getcwd())
        exports.append(f"{library.spec_variable}={SPEC_FILE}")
        print(f"# wrote ./{SPEC_FILE}: run the suite from this directory", file=sys.stderr)
    print("export " + " ".join(exports))


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m torch_openreg.testing libraries", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the libraries, their device switches, and how each suite runs on openreg")
    env = commands.add_parser("env", help="shell export lines setting a library's switch to openreg")
    env.add_argument("library")
    run = commands.add_parser("compare", help="a pytest selection on the CPU and on openreg, and what differs")
    run.add_argument("library")
    run.add_argument("--report", metavar="PATH", help="write both runs' outcomes and the differences there (JSON)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="pytest's arguments: test files, -k, ...")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, library in LIBRARIES.items():
            switch = " ".join(f"{variable}={value}" for variable, value in library.switch.items()) or "-"
            spec = f" {library.spec_variable}={SPEC_FILE}" if library.spec_variable else ""
            print(f"{name}: {switch}{spec}\n    {library.note}")
        return 0
    if args.command == "env":
        _print_environment(args.library)
        return 0
    from .requirements import exit_unless_installed

    exit_unless_installed()
    return compare(args.library, args.pytest_args, args.report)
