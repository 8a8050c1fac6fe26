"""Device-generic correctness suites: PyTorch's OpInfo operators (opinfo), ModuleInfo modules (modules) and
OptimizerInfo optimizers (optim) run on the device and on the CPU and compared case by case; compile runs the OpInfo
operators through torch.compile on the device against eager CPU; external runs a PyTorch device-generic test file for
the device; fuzz runs random operator programs on both and compares them bit for bit; libraries runs a library's own
test suite (timm, transformers, diffusers, accelerate) on the CPU and on the device and lists what differs. Details:
docs/testing.md, docs/libraries.md."""

import argparse
import importlib
import itertools
import sys

from . import defaults, expected, quick, shard
from .report import Report
from .requirements import exit_unless_installed
from .runner import run_jobs


def _suite(name):
    """A suite's module, imported when a command runs (they import torch.testing._internal, seconds)."""
    exit_unless_installed()
    return importlib.import_module(f".{name}", __package__)


def _dtype_list(text):
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _parser():
    # --help prints the docstring as it is, in a terminal: plain text, no reST markup.
    parser = argparse.ArgumentParser(prog="python -m torch_openreg.testing", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    def suite_command(name, help_text, filter_flag, dtypes):
        command = commands.add_parser(name, help=help_text)
        command.add_argument(filter_flag, dest="filter", metavar="REGEX", help="only names matching REGEX (re.search)")
        command.add_argument("--dtypes", type=_dtype_list, default=dtypes, help="comma-separated torch dtype names")
        command.add_argument("--quick", action="store_true", help="the fixed CI slice")
        command.add_argument("--shard", type=shard.parse, metavar="I/N", help="run the I-th of N slices (1-based)")
        command.add_argument("--report", metavar="PATH", help="write the JSON report there")
        command.add_argument("--timeout", type=float, default=180.0, help="seconds a case may take (default 180)")
        command.add_argument("--expected-failures", default=expected.DEFAULT_PATH, metavar="PATH")
        command.add_argument("-v", "--verbose", action="store_true", help="print every case, not only failures")
        return command

    ops = suite_command("opinfo", "op_db operators against the CPU", "--ops", defaults.OPINFO_DTYPES)
    ops.add_argument("--max-samples", type=int, metavar="N", help="at most N sample inputs per operator and dtype")
    compiled = suite_command(
        "compile", "op_db operators through torch.compile against eager CPU", "--ops", defaults.COMPILE_DTYPES
    )
    compiled.add_argument("--max-samples", type=int, metavar="N", help="at most N sample inputs per operator and dtype")
    compiled.add_argument(
        "--backend",
        type=_compile_backend,
        help=f"torch.compile backend for the device (default {defaults.COMPILE_BACKEND}; the CPU always uses inductor)",
    )
    compiled.add_argument(
        "--aoti",
        action="store_true",
        help="compile ahead of time instead of with torch.compile (torch.export, then an AOTInductor package for the "
        "CPU and one for the device), forward cases only",
    )
    suite_command("modules", "module_db modules against the CPU", "--modules", defaults.MODULE_DTYPES)
    suite_command("optim", "optim_db optimizers against the CPU", "--optimizers", defaults.OPTIMIZER_DTYPES)

    ext = commands.add_parser("external", help="a PyTorch device-generic test file, for openreg only")
    ext.add_argument("path", help="test file (or directory) using instantiate_device_type_tests")
    ext.add_argument("-k", dest="keyword", metavar="EXPR", help="pytest -k expression")
    ext.add_argument("--shard", type=shard.parse, metavar="I/N", help="run the I-th of N slices of the tests")
    ext.add_argument(
        "--bypass-device-restrictions", action="store_true", help="run @onlyOn / @onlyCUDA tests on openreg too"
    )
    ext.epilog = "Other options are passed to pytest."

    # Parsed by libraries.main (see main below); listed here for --help.
    commands.add_parser(
        "libraries",
        help="a library's own test suite on the CPU and on openreg (libraries {list,env,compare} --help)",
        add_help=False,
    )

    fuzz = commands.add_parser("fuzz", help="random operator programs against the CPU, divergences shrunk")
    fuzz.add_argument("--seconds", type=float, default=600.0, help="stop after this long (default 600)")
    fuzz.add_argument("--seed", type=int, default=0, help="the first seed; seeds follow in order (default 0)")
    fuzz.add_argument("--programs", type=int, metavar="N", help="stop after N programs")
    fuzz.add_argument(
        "--include-known",
        action="store_true",
        help="also generate the known divergences the default run leaves out (fuzz_known.KNOWN_DIVERGENCES)",
    )
    fuzz.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each seed before its program runs (the last one printed is the one a crash hit)",
    )
    return parser


def _compile_backend(name):
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown torch.compile backend {name!r}; known: {', '.join(known)}")
    return name


def _fuzz(args):
    fuzz_campaign = _suite("fuzz_campaign")
    seeds = itertools.count(args.seed) if args.programs is None else range(args.seed, args.seed + args.programs)
    exclusions = () if args.include_known else _suite("fuzz_known").KNOWN_DIVERGENCES
    if args.verbose:
        seeds = _announced(seeds)

    def show(finding):
        print(f"--- divergence (seed {finding.seed}), smallest reproducer:\n{finding.script}", flush=True)

    ran, findings = fuzz_campaign.campaign(seeds, args.seconds, exclusions=exclusions, on_finding=show)
    print(f"{ran} programs (seeds {args.seed}-{args.seed + ran - 1}), {len(findings)} distinct divergences")
    return 1 if findings else 0


def _announced(seeds):
    for seed in seeds:
        print(f"seed {seed}", flush=True)
        yield seed


def _jobs(args):
    if args.command == "opinfo":
        opinfo = _suite("opinfo")
        names = quick.OPS if args.quick else None
        dtypes = quick.OP_DTYPES if args.quick else args.dtypes
        max_samples = quick.MAX_SAMPLES if args.quick else args.max_samples
        return opinfo.list_jobs(args.filter, dtypes, max_samples, names)
    if args.command == "compile":
        compile_suite = _suite("compile")
        backend = defaults.COMPILE_AOTI if args.aoti else args.backend or defaults.COMPILE_BACKEND
        if args.quick:
            return compile_suite.list_jobs(
                args.filter, quick.COMPILE_DTYPES, quick.COMPILE_MAX_SAMPLES, quick.COMPILE_OPS, backend
            )
        return compile_suite.list_jobs(args.filter, args.dtypes, args.max_samples, backend=backend)
    if args.command == "modules":
        modules = _suite("modules")
        if args.quick:
            return modules.list_jobs(args.filter, quick.MODULE_DTYPES, quick.MODULES, quick.MAX_MODULE_INPUTS)
        return modules.list_jobs(args.filter, args.dtypes)
    return _suite("optim").list_jobs(args.filter, args.dtypes, quick.OPTIMIZERS if args.quick else None)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["libraries"]:
        from . import libraries

        return libraries.main(argv[1:])
    parser = _parser()
    args, pytest_args = parser.parse_known_args(argv)
    if args.command == "external":
        return _suite("external").run(args.path, args.keyword, args.shard, pytest_args, args.bypass_device_restrictions)
    if pytest_args:
        parser.error(f"unrecognized arguments: {' '.join(pytest_args)}")
    if args.command == "compile" and args.aoti and args.backend is not None:
        parser.error("--aoti compiles with AOTInductor: it takes no --backend")
    if args.command == "fuzz":
        return _fuzz(args)
    entries = expected.load(args.expected_failures)
    jobs = shard.select(_jobs(args), args.shard)
    report = Report(args.report, args.verbose)

    def record(job, case):
        if case is None:
            report.job_finished(len(jobs))
        else:
            report.add(
                expected.apply(entries, {"suite": job["suite"], "name": job["name"], "dtype": job["dtype"], **case})
            )

    print(f"{args.command}: {len(jobs)} jobs", flush=True)
    run_jobs(jobs, args.timeout, record)
    if args.command == "compile":
        compile_suite = _suite("compile")
        report.summary = compile_suite.pair_summary(report.groups)
        print(compile_suite.summary_line(report.summary))
    return 0 if report.close() else 1


if __name__ == "__main__":
    sys.exit(main())
