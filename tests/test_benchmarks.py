"""The benchmark suite runs: `benchmarks/run.py --quick` writes every case with
positive timings. Timings are not asserted (CI machines vary)."""

import json
import os
import subprocess
import sys

import pytest

RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "run.py")

CASES = {
    "small": {"empty", "view", "as_strided", "add", "atan2", "add_", "add_out", "item"},
    "large": {"matmul", "conv2d", "sum"},
    "training": {"mlp", "cnn"},
    "churn": {"mixed"},
    "copies": {"h2d", "d2h", "d2d", "pinned_h2d"},
    "import": {"torch_openreg", "autoload"},
    "amp": {"mlp_bf16"},
    "autocast_cost": {"add", "relu"},
    "all_reduce": {"float32"},
    "ddp": {"mlp"},
    "compiled": {"mlp", "cnn"},
    "compile_time": {"cold", "warm"},
    "optimizer": {"sgd", "sgd_foreach", "adam", "adam_foreach"},
    "training_alone": {"mlp", "cnn"},
    "amp_alone": {"mlp_bf16"},
    "compiled_alone": {"mlp", "cnn"},
}
# Compilation is measured under the default setting only.
DEFAULT_SETTING_ONLY = {"compiled", "compile_time", "compiled_alone"}


@pytest.mark.long
def test_quick_run_writes_every_case(tmp_path):
    out = tmp_path / "results.json"
    # The timeout only ends a hung run: on an idle machine it takes 2 to 4 minutes, on a loaded one several times that.
    proc = subprocess.run(
        [sys.executable, RUN, "--quick", "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    report = json.loads(out.read_text())
    results = report["results"]

    # Group 17 runs where its libraries are installed (an optional extra), and ends with the suite's total.
    library_suite = results["protection_on"].pop("library_suite", None)
    assert library_suite is None or list(library_suite)[-1] == "total"
    assert {group: set(cases) for group, cases in results["protection_on"].items()} == CASES
    assert {group: set(cases) for group, cases in results["protection_off"].items()} == {
        group: cases for group, cases in CASES.items() if group not in DEFAULT_SETTING_ONLY
    }
    # The copying fallback runs the cases that reached the fallback, atan2 at least.
    assert "atan2" in results["copy_fallback"]["small"]
    assert results["protection_on"]["small"]["atan2"]["fallback_ops"]

    for setting, groups in results.items():
        for group, cases in groups.items():
            for name, case in cases.items():
                assert case["openreg_s"] > 0 and case["cpu_s"] > 0, (setting, group, name, case)
                assert case["ratio"] > 0, (setting, group, name, case)
    assert report["machine"]["nproc"] >= 1


def saved_report(small):
    return {"quick": True, "results": {"protection_on": {"small": small}, "protection_off": {}, "copy_fallback": {}}}


def test_saved_report_lists_misses_within_noise(tmp_path):
    """`--from` reprints a saved report; a missed target that some repetition met is listed as noise, one that
    no repetition met is not."""

    def case(description, ratio, repetitions):
        return {
            "description": description,
            "openreg_s": ratio * 1e-6,
            "cpu_s": 1e-6,
            "ratio": ratio,
            "repetition_ratios": repetitions,
            "fallback_ops": {},
        }

    saved = tmp_path / "report.json"
    saved.write_text(
        json.dumps(
            saved_report(
                {
                    "add": case("add (noisy miss)", 1.25, [1.25, 1.31, 1.15]),  # target 1.2x: one repetition met it
                    "atan2": case("atan2 (clear miss)", 2.0, [1.9, 2.0, 2.1]),  # target 1.5x: none did
                }
            )
        )
    )
    proc = subprocess.run([sys.executable, RUN, "--from", str(saved)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    table, _, noise = proc.stdout.partition("within noise")
    assert "add (noisy miss)" in table and "atan2 (clear miss)" in table
    assert table.count("missed") == 3  # the two rows and the heading of the noise list
    assert "add (noisy miss)" in noise and "best repetition 1.15x" in noise
    assert "atan2" not in noise


def test_case_measured_in_several_processes_reports_the_median_process(tmp_path):
    """A case run in several child processes keeps the median process's entry, every process's ratio and every
    repetition; the table lists the processes' ratios."""
    sys.path.insert(0, os.path.dirname(RUN))
    try:
        import run
    finally:
        sys.path.remove(os.path.dirname(RUN))

    def entry(ratio, repetitions):
        return {
            "description": "MLP step",
            "openreg_s": ratio * 1e-3,
            "cpu_s": 1e-3,
            "ratio": ratio,
            "repetition_ratios": repetitions,
            "fallback_ops": {},
        }

    merged = run.median_process([entry(1.3, [1.3, 1.4]), entry(0.9, [0.9]), entry(1.1, [1.0, 1.2])])
    assert merged["ratio"] == 1.1 and merged["openreg_s"] == 1.1e-3
    assert merged["process_ratios"] == [1.3, 0.9, 1.1]
    assert merged["repetition_ratios"] == [1.3, 1.4, 0.9, 1.0, 1.2]
    assert run.median_process([entry(1.3, [1.3]), entry(0.9, [0.9])])["ratio"] == 0.9  # the lower of two
    assert run.median_process([entry(1.3, [1.3])]) == entry(1.3, [1.3])

    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(saved_report({"add": merged})))
    proc = subprocess.run([sys.executable, RUN, "--from", str(saved)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "several processes" in proc.stdout and "1. MLP step" in proc.stdout and "1.30x, 0.90x, 1.10x" in proc.stdout


def test_saved_reports_compared_case_by_case(tmp_path):
    """`--against` prints each ratio beside an earlier report's, naming the cases that got slower or faster (the
    copies' ratios are bandwidths: a lower one is slower)."""

    def case(description, ratio):
        return {
            "description": description,
            "openreg_s": ratio * 1e-6,
            "cpu_s": 1e-6,
            "ratio": ratio,
            "repetition_ratios": [ratio],
            "fallback_ops": {},
        }

    def report(add, atan2, h2d):
        saved = saved_report({"add": case("add (stub kernel)", add), "atan2": case("atan2 (fallback)", atan2)})
        saved["results"]["protection_on"]["copies"] = {"h2d": case("host->device", h2d)}
        saved["load_average_before"] = [0.5, 0.5, 0.5]
        return saved

    then, now = tmp_path / "then.json", tmp_path / "now.json"
    then.write_text(json.dumps(report(add=1.0, atan2=1.4, h2d=1.0)))
    now.write_text(json.dumps(report(add=1.3, atan2=1.41, h2d=0.8)))
    proc = subprocess.run(
        [sys.executable, RUN, "--from", str(now), "--against", str(then)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    comparison = proc.stdout.split("against the last saved run", 1)[1].splitlines()
    [add] = [line for line in comparison if "add (stub kernel)" in line]
    [atan2] = [line for line in comparison if "atan2 (fallback)" in line]
    [h2d] = [line for line in comparison if "host->device" in line]
    assert add.split()[-3:] == ["1.00x", "1.30x", "slower"]
    assert atan2.split()[-2:] == ["1.40x", "1.41x"]
    assert h2d.split()[-3:] == ["1.00x", "0.80x", "slower"]
