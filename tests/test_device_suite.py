"""The CI slice of the device-generic suites (``--quick``): OpInfo operators, modules and optimizers."""

import os
import re
import subprocess
import sys

import pytest

from torch_openreg.testing.__main__ import main

COUNTS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.MULTILINE)


@pytest.mark.long
@pytest.mark.parametrize("suite", ["opinfo", "modules", "optim"])
def test_quick_slice_passes(suite, capsys, tmp_path):
    report = tmp_path / "report.json"
    code = main([suite, "--quick", "--report", str(report)])
    output = capsys.readouterr().out
    passed, failed, _ = map(int, COUNTS.findall(output)[-1])
    assert failed == 0 and code == 0, output
    assert passed > 0, output
    assert report.exists()


def test_quick_slice_names_exist_in_pytorchs_databases():
    # A misspelled or removed name would silently shrink the CI slice.
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db
    from torch.testing._internal.common_optimizers import optim_db

    from torch_openreg.testing import quick

    op_names = {op.name for op in op_db} | {f"{op.name}.{op.variant_test_name}" for op in op_db}
    assert sorted(quick.OPS - op_names) == []
    assert sorted(quick.MODULES - {m.name for m in module_db}) == []
    assert sorted(quick.OPTIMIZERS - {o.name for o in optim_db}) == []


SUITE_WITH_CRASHES = '''
import os
import signal
import time


def iter_cases(job):
    yield "ok", 0, lambda: None
    yield "segfault", 1, lambda: os.kill(os.getpid(), signal.SIGSEGV)
    yield "hang", 2, lambda: time.sleep(600)
    yield "error", 3, lambda: 1 / 0
    yield "ok", 4, lambda: None
'''


@pytest.mark.long
def test_worker_crash_and_timeout_fail_only_their_case(tmp_path, monkeypatch):
    from torch_openreg.testing.runner import run_jobs

    (tmp_path / "suite_with_crashes.py").write_text(SUITE_WITH_CRASHES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    results = []
    job = {"suite": "demo", "module": "suite_with_crashes", "name": "demo", "dtype": "float32"}
    run_jobs([job], timeout=10, record=lambda job, case: case and results.append(case))
    outcome = {case["sample"]: (case["status"], case["message"]) for case in results}
    assert sorted(outcome) == [0, 1, 2, 3, 4], results
    assert outcome[0][0] == outcome[4][0] == "passed"
    assert outcome[1][0] == "failed" and "crash: worker killed by SIGSEGV" in outcome[1][1]
    assert outcome[2][0] == "failed" and outcome[2][1].startswith("timeout")
    assert outcome[3][0] == "failed" and "ZeroDivisionError" in outcome[3][1]


@pytest.mark.slow
def test_help_does_not_import_the_suites():
    """--help answers from the command line's defaults, without the seconds of importing the suites (and
    torch.testing._internal with them)."""
    code = (
        "import sys\n"
        "from torch_openreg.testing.__main__ import main\n"
        "try:\n"
        "    main(['opinfo', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "suites = ['torch.testing._internal.common_methods_invocations', 'torch.testing._internal.opinfo'] + "
        "[f'torch_openreg.testing.{name}' for name in ('opinfo', 'compile', 'modules', 'optim', 'external')]\n"
        "print([name for name in suites if name in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--dtypes" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"
