"""The benchmark suite: every case timed on openreg and on the CPU in the same
process, interleaved, under each setting, against the project's targets.

Cases (built by cases.py): small operators, large operators, training steps, allocation churn,
copy bandwidth, the import time of the backend, two ranks' all_reduce and DDP step
(benchmarks/distributed.py, launched with torchrun), torch.compile (compiled
training steps, cold and warm compile times), and, where timm or transformers is
installed, a library's tests in fresh processes (benchmarks/library_suite.py). Each group runs in child processes
of its own, which also time the CPU, under each setting (read once per process):
memory protection on (the default) and off, and the copying fallback
(OPENREG_FALLBACK_MODE=copy) for the cases that reach the fallback. The table
shows medians, openreg/CPU ratios and whether each target is met; see
docs/performance.md for the latest results.

    python benchmarks/run.py [--quick] [--json out.json] [--plot out.png]
    python benchmarks/run.py --from out.json [--plot out.png]    # a saved report, no run

Every run also saves its report as benchmarks/results/last.json (last-quick.json for --quick) and prints each
ratio beside the one of the previous run of the same mode saved there (or of --against JSON; with --from too).

One group alone, in this process (JSON on stdout; no table, no other settings):

    python benchmarks/run.py --child '{"amp": null, "autocast_cost": null}'
    python benchmarks/run.py --child '{"training": null}' --device cpu    # one device only
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from cases import BUILDERS, copy_bytes  # benchmarks/cases.py, beside this script
import library_suite  # benchmarks/library_suite.py, beside this script

GROUPS = {
    "small": "1. small operators (16 elements)",
    "large": "2. large operators",
    "training": "3. training step (forward, backward, SGD step)",
    "churn": "4. allocation churn",
    "copies": "5. copy bandwidth (ratio: openreg GB/s over host memcpy GB/s)",
    "import": "6. import time, child processes (cpu column: import torch without the backend)",
    "amp": "7. bfloat16 training step under autocast (cpu column: the same under CPU autocast)",
    "autocast_cost": "8. 100 operators outside the autocast lists (cpu column: openreg, autocast off)",
    "all_reduce": "9. all_reduce across 2 ranks (ratio: openreg bandwidth over gloo's on CPU tensors)",
    "ddp": "10. DDP training step across 2 ranks (forward, backward, gradient all_reduce, SGD step)",
    "compiled": "11. torch.compile training step (Inductor; cpu column: compiled for the CPU)",
    "compile_time": "12. compiling the MLP training step from a reset Dynamo (cpu column: compiling for the CPU)",
    "optimizer": "13. optimizer step over 100 parameters of 16 elements",
    "training_alone": "14. training step, each device in a process of its own (the CPU's runs no openreg kernel)",
    "amp_alone": "15. bfloat16 autocast training step, each device in a process of its own",
    "compiled_alone": "16. torch.compile training step, each device in a process of its own",
    "library_suite": "17. a library's tests, each in a fresh process (timm, transformers: the optional extra)",
}
# Groups measured from the builder of another group, each device in child processes of its own: no CPU repetition
# shares a process with openreg's autograd device thread and its OpenMP team (see docs/performance.md).
ALONE = {"training_alone": "training", "amp_alone": "amp", "compiled_alone": "compiled"}

# Child-process settings: name -> environment. The copy fallback runs only the
# cases that reach the fallback under the default setting.
SETTINGS = {
    "protection_on": {"OPENREG_MEMORY_PROTECTION": "1", "OPENREG_FALLBACK_MODE": "zero_copy"},
    "protection_off": {"OPENREG_MEMORY_PROTECTION": "0", "OPENREG_FALLBACK_MODE": "zero_copy"},
    "copy_fallback": {"OPENREG_MEMORY_PROTECTION": "1", "OPENREG_FALLBACK_MODE": "copy"},
}
DEFAULT_SETTING = "protection_on"
# Groups measured under the default setting only: their cost is compilation, which protection does not change.
DEFAULT_SETTING_ONLY = {"compiled", "compile_time", "compiled_alone"}

# group -> [(comparison, bound, label)], checked against the default setting.
# Ratios are openreg/CPU times, except copies: openreg/memcpy bandwidths.
TARGETS = {
    "small": [("<=", 1.5, "")],
    "large": [("<=", 1.05, "")],
    "training": [("<=", 1.05, ""), ("<=", 2.0, " prot on")],
    "churn": [("<=", 1.0, "")],
    "copies": [(">=", 0.9, "")],
    "import": [],
    "amp": [("<=", 1.1, "")],
    "autocast_cost": [("<=", 1.05, "")],
    "all_reduce": [(">=", 0.9, "")],
    "ddp": [("<=", 1.15, "")],
    "compiled": [("<=", 1.10, "")],
    "compile_time": [("<=", 1.2, "")],
    "optimizer": [("<=", 1.2, "")],
    "training_alone": [("<=", 1.10, "")],
    "amp_alone": [("<=", 1.10, "")],
    "compiled_alone": [("<=", 1.10, "")],
    "library_suite": [("<=", 1.10, "")],
}
# (group, case) -> targets of a case that differs from its group's.
CASE_TARGETS = {
    ("small", "add"): [("<=", 1.2, "")],
    ("small", "add_"): [("<=", 1.3, "")],
    ("small", "add_out"): [("<=", 1.3, "")],
}

# group -> (repetitions, calls per repetition), full run and --quick.
REPEATS = {
    "small": ((15, 2000), (3, 200)),
    "large": ((15, 1), (3, 1)),
    "training": ((15, 3), (3, 1)),
    "churn": ((9, 1), (3, 1)),
    "copies": ((11, 1), (3, 1)),
    "amp": ((15, 3), (3, 1)),
    "autocast_cost": ((15, 20), (3, 2)),
    "all_reduce": ((11, 1), (3, 1)),
    "ddp": ((60, 1), (3, 1)),
    "compiled": ((15, 3), (3, 1)),
    "compile_time": ((5, 1), (1, 1)),
    "optimizer": ((15, 10), (3, 2)),
}
IMPORT_RUNS = (9, 1)
# group -> child processes per setting, full run and --quick (1 if not listed). Every group runs in processes of
# its own so that none inherits another's heap: after a group frees a large CPU tensor, glibc serves the CPU's
# later multi-megabyte tensors from its heap instead of fresh mappings, which took the CNN step's page faults on
# the CPU from about 2,000 per step to none. The training steps run in several processes: each process draws its
# own heap, OpenMP and scheduling state, which moves a step's ratio by up to a tenth, and the repetitions within
# one process do not sample that.
PROCESSES = {
    "training": (3, 1),
    "amp": (3, 1),
    "compiled": (3, 1),
    "training_alone": (3, 1),
    "amp_alone": (3, 1),
    "compiled_alone": (3, 1),
}


# --- measurement


def sample(fn, inner, sync):
    """Seconds per call of `fn`, over `inner` calls and a final `sync`."""
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
    return (time.perf_counter() - start) / inner


def interleaved(device_fn, cpu_fn, device_sync, repeats, inner):
    """Seconds per call of each repetition on openreg and on the CPU, alternating repetitions."""
    device_fn()  # warm-up: allocator caches, first-call costs, page faults
    cpu_fn()
    device_samples, cpu_samples = [], []
    for _ in range(repeats):
        device_samples.append(sample(device_fn, inner, device_sync))
        cpu_samples.append(sample(cpu_fn, inner, lambda: None))
    return device_samples, cpu_samples


def fallback_ops(torch, fn):
    """{aten operator: calls} that one call of `fn` sent to the CPU fallback."""
    torch.openreg.reset_fallback_stats()
    fn()
    torch.openreg.synchronize()
    return torch.openreg.fallback_stats()


def ratio(group, openreg_s, cpu_s):
    """openreg/CPU time, or for copies and all_reduce (same bytes on both sides) the bandwidth ratio."""
    return cpu_s / openreg_s if group in ("copies", "all_reduce") else openreg_s / cpu_s


def case_result(group, description, device_samples, cpu_samples, fallback):
    """One case's entry in the JSON, from its interleaved repetitions."""
    openreg_s, cpu_s = statistics.median(device_samples), statistics.median(cpu_samples)
    return {
        "description": description,
        "openreg_s": openreg_s,
        "cpu_s": cpu_s,
        "ratio": ratio(group, openreg_s, cpu_s),
        # Each repetition's ratio against the CPU repetition right after it: the spread a verdict is read
        # against (see noisy_misses).
        "repetition_ratios": [ratio(group, d, c) for d, c in zip(device_samples, cpu_samples)],
        "fallback_ops": fallback,
    }


def child(cases, quick, device=None):
    """Runs `cases` ({group: [case] or None for all}) in this process; prints the results as JSON. With
    `device`, times that device alone: {group: {case: [description, seconds of each repetition]}}."""
    import torch  # autoloads torch_openreg

    results = {}
    for group, keys in cases.items():
        if device is not None:
            results[group] = alone(torch, group, keys, device, quick)
            continue
        repeats, inner = REPEATS[group][1 if quick else 0]
        on_device = BUILDERS[group](torch, "openreg", quick)
        on_cpu = BUILDERS[group](torch, "cpu", quick)
        results[group] = {}
        for key in keys or on_device:
            description, device_fn = on_device[key]
            samples = interleaved(device_fn, on_cpu[key][1], torch.openreg.synchronize, repeats, inner)
            results[group][key] = case_result(group, description, *samples, fallback_ops(torch, device_fn))
        del on_device, on_cpu  # frees the 256 MiB copy buffers before the next group
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "results": results}))


def alone(torch, group, keys, device, quick):
    """{case: [description, seconds of each repetition]} of `group`'s cases on `device` only."""
    built = ALONE.get(group, group)
    repeats, inner = REPEATS[built][1 if quick else 0]
    cases = BUILDERS[built](torch, device, quick)
    sync = torch.openreg.synchronize if device == "openreg" else lambda: None
    timings = {}
    for key in keys or cases:
        description, fn = cases[key]
        fn()  # warm-up
        timings[key] = [description, [sample(fn, inner, sync) for _ in range(repeats)]]
    return timings


def median_process(entries):
    """One case measured in several processes: the entry of the process with the median ratio (the lower one of
    an even count), with every process's ratio and every repetition's."""
    if len(entries) == 1:
        return entries[0]
    median = dict(sorted(entries, key=lambda entry: entry["ratio"])[(len(entries) - 1) // 2])
    median["process_ratios"] = [entry["ratio"] for entry in entries]
    median["repetition_ratios"] = [r for entry in entries for r in entry["repetition_ratios"]]
    return median


def measure_groups(setting, cases, quick):
    """{group: {case: result}} for `cases` ({group: [case] or None for all}), each group in child processes of
    its own; and the torch version and thread count the children reported."""
    results = {}
    for group, keys in cases.items():
        processes = PROCESSES.get(group, (1, 1))[1 if quick else 0]
        runs = [run_child(setting, {group: keys}, quick) for _ in range(processes)]
        results[group] = {
            key: median_process([run["results"][group][key] for run in runs]) for key in runs[0]["results"][group]
        }
    return results, (runs[0]["torch"], runs[0]["threads"])


def alone_results(setting, group, quick):
    """{case: result} of `group` with each device timed in child processes of its own, openreg's and the CPU's
    children alternating; a repetition's ratio pairs it with the CPU repetition of the same index."""
    entries = {}
    for _ in range(PROCESSES[group][1 if quick else 0]):
        runs = {
            device: run_child(setting, {group: None}, quick, device)["results"][group] for device in ("openreg", "cpu")
        }
        for key, (description, device_samples) in runs["openreg"].items():
            entries.setdefault(key, []).append(case_result(group, description, device_samples, runs["cpu"][key][1], {}))
    return {key: median_process(measured) for key, measured in entries.items()}


def fallback_cases(results):
    """{group: [case]} of the cases that called the fallback."""
    cases = {}
    for group, group_results in results.items():
        keys = [key for key, case in group_results.items() if case["fallback_ops"]]
        if keys and group in BUILDERS:  # the distributed groups run in their own ranks
            cases[group] = keys
    return cases


def run_child(setting, cases, quick, device=None):
    env = dict(os.environ, **SETTINGS[setting])
    command = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(cases)] + (["--quick"] if quick else [])
    command += ["--device", device] if device else []
    proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def import_seconds(code, env):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tempfile.gettempdir())
    return time.perf_counter() - start


def import_times(setting, runs):
    """Import cases: openreg = with the backend, CPU = `import torch` without it."""
    base = dict(os.environ, **SETTINGS[setting])
    autoload_off = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    autoload_on = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    samples = {"torch": [], "torch_openreg": [], "autoload": []}
    import_seconds("import torch", autoload_on)  # warm-up: file system cache
    for _ in range(runs):  # interleaved, so all three see the same machine state
        samples["torch"].append(import_seconds("import torch", autoload_off))
        samples["torch_openreg"].append(import_seconds("import torch, torch_openreg", autoload_off))
        samples["autoload"].append(import_seconds("import torch", autoload_on))
    cpu_s = statistics.median(samples["torch"])
    cases = {
        "torch_openreg": ("import torch, torch_openreg (autoload off)", statistics.median(samples["torch_openreg"])),
        "autoload": ("import torch (autoload on)", statistics.median(samples["autoload"])),
    }
    return {
        key: {
            "description": f"{description}, {runs} runs",
            "openreg_s": openreg_s,
            "cpu_s": cpu_s,
            "ratio": openreg_s / cpu_s,
            "fallback_ops": {},
        }
        for key, (description, openreg_s) in cases.items()
    }


def distributed_results(setting, quick):
    """The all_reduce and ddp groups, from two ranks launched by benchmarks/distributed.py."""
    import distributed  # beside this script

    return distributed.measure(dict(os.environ, **SETTINGS[setting]), quick)


# --- report


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def targets_of(group, key):
    return CASE_TARGETS.get((group, key), TARGETS[group])


def meets(comparison, bound, value):
    return value <= bound if comparison == "<=" else value >= bound


def verdicts(group, key, value):
    """[(target text, "met"/"missed")] for a default-setting ratio."""
    return [
        (f"{comparison} {bound:g}x{label}", "met" if meets(comparison, bound, value) else "missed")
        for comparison, bound, label in targets_of(group, key)
    ]


def noisy_misses(default):
    """[(description, target text, best repetition's ratio)] of the missed targets that at least one
    repetition met: misses the run cannot tell from noise."""
    misses = []
    for group, cases in default.items():
        for key, case in cases.items():
            repetitions = case.get("repetition_ratios")
            if not repetitions:
                continue
            for comparison, bound, label in targets_of(group, key):
                best = min(repetitions) if comparison == "<=" else max(repetitions)
                if not meets(comparison, bound, case["ratio"]) and meets(comparison, bound, best):
                    misses.append((case["description"], f"{comparison} {bound:g}x{label}", best))
    return misses


def format_value(group, seconds, quick):
    if group == "copies":
        return f"{copy_bytes(quick) / seconds / 1e9:.2f} GB/s"
    if group == "all_reduce":
        import distributed

        return f"{distributed.all_reduce_bytes(quick) / seconds / 1e9:.2f} GB/s"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def print_table(results, quick):
    default = results[DEFAULT_SETTING]
    print(
        f"{'case':<58} {'cpu':>11} {'openreg':>11} {'ratio':>6}  {'target':<17} {'':<6} {'prot off':>8} {'copy fb':>8}"
    )
    for group, title in GROUPS.items():
        if group not in default:  # a saved report from before the group existed
            continue
        print(title)
        for key, case in default[group].items():
            checks = verdicts(group, key, case["ratio"]) or [("", "")]
            other = [results[s].get(group, {}).get(key) for s in ("protection_off", "copy_fallback")]
            other_text = " ".join(f"{o['ratio']:>7.2f}x" if o else f"{'-':>8}" for o in other)
            print(
                f"  {case['description']:<56} {format_value(group, case['cpu_s'], quick):>11} "
                f"{format_value(group, case['openreg_s'], quick):>11} {case['ratio']:>5.2f}x  "
                f"{checks[0][0]:<17} {checks[0][1]:<6} {other_text}"
            )
            for target, verdict in checks[1:]:
                print(f"  {'':<56} {'':>11} {'':>11} {'':>6}  {target:<17} {verdict:<6}")
    spread = [
        (f"{GROUPS[group].split('.')[0]}. {case['description']}", case["process_ratios"])
        for group, cases in default.items()
        if group in GROUPS
        for case in cases.values()
        if "process_ratios" in case
    ]
    if spread:
        print("measured in several processes (the table shows the median one):")
        for label, ratios in spread:
            print(f"  {label:<56} " + ", ".join(f"{r:.2f}x" for r in ratios))
    noisy = noisy_misses(default)
    if noisy:
        print("missed, but within noise (at least one repetition met the target):")
        for description, target, best in noisy:
            print(f"  {description:<56} best repetition {best:.2f}x, target {target}")


def load(path):
    with open(path) as f:
        return json.load(f)


def print_comparison(default, saved):
    """Each default-setting ratio against the same case's in `saved`, the previous run of the same mode (full or
    --quick): the check that nothing got slower, which a reader judges against the repetitions' spread."""
    before = saved["results"][DEFAULT_SETTING]
    print(
        f"against the last saved run ({saved.get('finished', 'undated')}, load average "
        f"{saved['load_average_before'][0]:.2f}): ratio then, now"
    )
    for group, cases in default.items():
        for key, case in cases.items():
            then = before.get(group, {}).get(key)
            if then is None or group not in GROUPS:
                continue
            change = case["ratio"] / then["ratio"]
            if any(comparison == ">=" for comparison, _, _ in targets_of(group, key)):  # bandwidth ratios
                change = 1 / change
            note = "  slower" if change > 1.1 else "  faster" if change < 1 / 1.1 else ""
            print(
                f"  {GROUPS[group].split('.')[0]:>3}. {case['description']:<56} {then['ratio']:>5.2f}x "
                f"{case['ratio']:>5.2f}x{note}"
            )


def plot(default, path):
    """Draws every default-setting ratio against its target(s) as a PNG at `path` (needs matplotlib: the
    package's `plot` extra)."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("--plot needs matplotlib: pip install 'torch_openreg[plot]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []  # (label, ratio, [(comparison, bound)], met)
    for group, title in GROUPS.items():
        for key, case in default.get(group, {}).items():
            targets = [(comparison, bound) for comparison, bound, label in targets_of(group, key) if not label]
            met = all(meets(comparison, bound, case["ratio"]) for comparison, bound in targets)
            rows.append((f"{title.split('.')[0]}. {case['description'][:48]}", case["ratio"], targets, met))
    fig, ax = plt.subplots(figsize=(10, 0.26 * len(rows) + 1.2))
    positions = range(len(rows))[::-1]
    colors = ["#4c9a2a" if met else "#c0392b" for _, _, _, met in rows]
    if any(not targets for _, _, targets, _ in rows):
        colors = [c if targets else "#8c8c8c" for c, (_, _, targets, _) in zip(colors, rows)]
    ax.barh(list(positions), [r for _, r, _, _ in rows], color=colors, height=0.6)
    for y, (_, value, targets, _) in zip(positions, rows):
        for comparison, bound in targets:
            ax.plot([bound, bound], [y - 0.4, y + 0.4], color="black", linewidth=2)
        ax.text(value, y, f" {value:.2f}x", va="center", fontsize=7)
    ax.axvline(1.0, color="#555555", linewidth=0.8, linestyle=":")
    ax.set_yticks(list(positions), [label for label, _, _, _ in rows], fontsize=7)
    ax.set_xlabel(
        "openreg / CPU (copies and all_reduce: bandwidth ratio); black tick: target; "
        "green met, red missed, grey no target",
        fontsize=8,
    )
    ax.set_xlim(0, max(max(r for _, r, _, _ in rows), 1.6) * 1.12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main():
    parser = argparse.ArgumentParser(description="openreg against CPU eager: every case, every setting")
    parser.add_argument("--quick", action="store_true", help="few repetitions, smaller sizes (CI smoke run)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--plot", metavar="PNG", help="draw the ratios against their targets into this PNG (needs matplotlib)"
    )
    parser.add_argument(
        "--from",
        dest="saved",
        metavar="JSON",
        help="no run: print the table (and --plot) of a report written by --json",
    )
    parser.add_argument(
        "--against",
        metavar="JSON",
        help="compare the ratios with this saved report instead of the last run's (benchmarks/results/)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--device", choices=("openreg", "cpu"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.quick, args.device)
        return
    if args.saved:
        report = load(args.saved)
        print_table(report["results"], report["quick"])
        if args.against:
            print_comparison(report["results"][DEFAULT_SETTING], load(args.against))
        if args.plot:
            plot(report["results"][DEFAULT_SETTING], args.plot)
        return

    load_before = os.getloadavg()
    start = time.perf_counter()
    results = {}
    for setting in ("protection_on", "protection_off"):
        groups = [group for group in BUILDERS if setting == DEFAULT_SETTING or group not in DEFAULT_SETTING_ONLY]
        results[setting], (torch_version, threads) = measure_groups(setting, dict.fromkeys(groups), args.quick)
        results[setting]["import"] = import_times(setting, IMPORT_RUNS[1 if args.quick else 0])
        for group in ALONE:
            if setting == DEFAULT_SETTING or group not in DEFAULT_SETTING_ONLY:
                results[setting][group] = alone_results(setting, group, args.quick)
        results[setting].update(distributed_results(setting, args.quick))
    results[DEFAULT_SETTING].update(library_suite.measure(args.quick, dict(os.environ, **SETTINGS[DEFAULT_SETTING])))
    results["copy_fallback"] = measure_groups("copy_fallback", fallback_cases(results[DEFAULT_SETTING]), args.quick)[0]
    seconds = time.perf_counter() - start
    load_after = os.getloadavg()

    print_table(results, args.quick)
    machine = {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(),
        "torch": torch_version,
        "torch_threads": threads,
        "python": sys.version.split()[0],
    }
    print(
        f"machine: {machine['nproc']} cores, {machine['cpu']}, torch {torch_version} ({threads} threads); "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; run took {seconds:.0f} s"
    )
    report = {
        "machine": machine,
        "quick": args.quick,
        "seconds": seconds,
        "finished": time.strftime("%Y-%m-%d %H:%M"),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "targets": TARGETS,
        "results": results,
    }
    last = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "last-quick.json" if args.quick else "last.json"
    )
    against = args.against or (last if os.path.exists(last) else None)
    if against:
        print_comparison(results[DEFAULT_SETTING], load(against))
    os.makedirs(os.path.dirname(last), exist_ok=True)
    for path in filter(None, (last, args.json)):
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
    if args.plot:
        plot(results[DEFAULT_SETTING], args.plot)


if __name__ == "__main__":
    main()
