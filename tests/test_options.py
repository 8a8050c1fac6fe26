"""The OPENREG_* environment variables: the README documents exactly the
backend's options table, the documented defaults are the ones in force, and an
invalid value never breaks ``import torch``: CPU work runs, and the first
device use raises naming the variable and the value. The environment is read
once per process, so each case runs in a child."""

import pathlib
import re

import pytest

import torch_openreg._C as _C
from conftest import check_ok, parse_key_values, run_python

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"

# One invalid value per variable; test_every_option_has_an_invalid_case keeps
# this list complete.
INVALID = [
    ("OPENREG_DEVICE_COUNT", "abc"),
    ("OPENREG_DEVICE_COUNT", "0"),
    ("OPENREG_DEVICE_COUNT", "17"),
    ("OPENREG_DEVICE_MEMORY", "lots"),
    # Well-formed, but more address space than the process has (each device maps its capacity twice).
    ("OPENREG_DEVICE_MEMORY", "100000G"),
    ("OPENREG_MEMORY_PROTECTION", "2"),
    ("OPENREG_FALLBACK_MODE", "fast"),
    ("OPENREG_FALLBACK", "maybe"),
    ("OPENREG_FALLBACK_WARN", "yes"),
    ("OPENREG_FALLBACK_OPS", "add.Tensor,no_such_op"),
    ("OPENREG_SANITIZER", "on"),
    ("OPENREG_CUDA_CONTRACT", "cpu"),
    ("OPENREG_RANDOM_STREAM", "philox"),
]


def options_table():
    return {name: default for name, default, _ in _C._options()}


def readme_table():
    """{variable: default} from the README's environment-variable table."""
    rows = {}
    for line in README.read_text().splitlines():
        match = re.match(r"\|\s*`(OPENREG_\w+)`\s*\|([^|]*)\|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip().strip("`")
    return rows


def test_readme_documents_exactly_the_options_table():
    assert readme_table() == options_table()


def test_every_option_has_an_invalid_case():
    assert {name for name, _ in INVALID} == set(options_table())


@pytest.mark.slow
def test_documented_defaults_are_in_force():
    defaults = options_table()
    unset = {name: None for name in defaults}
    out = check_ok(
        run_python(
            """
        import warnings
        import torch
        print("count=", torch.openreg.device_count())
        print("capacity=", torch.openreg.mem_get_info(0)[1])
        x = torch.arange(4.).to("openreg")
        torch.openreg.reset_fallback_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ok = torch.equal(torch.atan2(x, x).cpu(), torch.atan2(x.cpu(), x.cpu()))
        print("fallback=", ok, torch.openreg.fallback_stats(), len(caught))
        """,
            **unset,
        )
    )
    r = parse_key_values(out)
    assert int(r["count"]) == int(defaults["OPENREG_DEVICE_COUNT"]), out
    memory = defaults["OPENREG_DEVICE_MEMORY"]
    assert memory.endswith("G")
    assert int(r["capacity"]) == int(memory[:-1]) << 30, out
    # Enabled (OPENREG_FALLBACK=1), silent (OPENREG_FALLBACK_WARN=0), no forced
    # operators (mul and arange's kernels are not counted).
    assert r["fallback"] == "True {'aten::atan2': 1} 0", out


@pytest.mark.slow
@pytest.mark.parametrize("name,value", INVALID, ids=[f"{n}={v}" for n, v in INVALID])
def test_invalid_value_fails_at_first_device_use_not_at_import(name, value):
    proc = run_python(
        """
        import torch
        print("cpu=", (torch.ones(2) * 3).tolist())
        for attempt in ("first", "again"):
            try:
                torch.ones(2, device="openreg")
            except RuntimeError as error:
                print(attempt + "=", " ".join(str(error).split()))
            else:
                print(attempt + "=none")
        print("initialized=", torch.openreg.is_initialized())
        """,
        **{name: value},
    )
    r = parse_key_values(check_ok(proc))
    assert r["cpu"] == "[3.0, 3.0]", proc.stdout
    bad = value.split(",")[-1]
    for attempt in ("first", "again"):
        assert name in r[attempt] and f"'{bad}'" in r[attempt], proc.stdout
    assert r["initialized"] == "False", proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("value", ["abc", "0"])
def test_device_count_is_zero_with_a_warning_when_the_count_is_invalid(value):
    # As torch.cuda.device_count(): no exception, 0 devices, the reason in a warning.
    out = check_ok(
        run_python(
            """
        import warnings
        import torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print("count=", torch.openreg.device_count())
        print("available=", torch.openreg.is_available())
        print("warning=", " ".join(str(w.message) for w in caught))
        """,
            OPENREG_DEVICE_COUNT=value,
        )
    )
    r = parse_key_values(out)
    assert r["count"] == "0" and r["available"] == "False", out
    assert f"OPENREG_DEVICE_COUNT='{value}'" in r["warning"], out
