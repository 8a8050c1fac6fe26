"""Loading the backend: the torch.backends entry point, explicit import, lazy init.

Each check needs a fresh interpreter, so they run in subprocesses; each child
prints KEY=VALUE lines that the test parses.
"""

import pytest

from conftest import check_ok, parse_key_values, run_python


@pytest.mark.slow
def test_import_torch_autoloads_without_initializing():
    out = check_ok(
        run_python(
            """
            import sys
            import torch
            print("loaded=", "torch_openreg" in sys.modules)
            print("backend_name=", torch._C._get_privateuse1_backend_name())
            print("has_module=", hasattr(torch, "openreg"))
            import torch_openreg
            # nothing is initialized by importing
            print("init_after_import=", torch.openreg.is_initialized())
            print("dev0_after_import=", torch_openreg._C._is_device_initialized(0))
            print("dev1_after_import=", torch_openreg._C._is_device_initialized(1))
            print("accelerator=", torch.accelerator.current_accelerator().type)
            print("is_available=", torch.accelerator.is_available())
            print("init_after_queries=", torch.openreg.is_initialized())
            x = torch.ones(2, device="openreg")
            print("device=", x.device)
            print("values=", x.cpu().tolist())
            print("init_after_tensor=", torch.openreg.is_initialized())
            print("dev0_after_tensor=", torch_openreg._C._is_device_initialized(0))
            print("dev1_after_tensor=", torch_openreg._C._is_device_initialized(1))
            y = torch.ones(2, device="openreg:1")
            print("dev1_after_tensor1=", torch_openreg._C._is_device_initialized(1))
            """,
            TORCH_DEVICE_BACKEND_AUTOLOAD=None,
        )
    )
    r = parse_key_values(out)
    assert r["loaded"] == "True", out
    assert r["backend_name"] == "openreg", out
    assert r["has_module"] == "True", out
    assert r["init_after_import"] == "False", out
    assert r["dev0_after_import"] == "False", out
    assert r["dev1_after_import"] == "False", out
    assert r["accelerator"] == "openreg", out
    assert r["is_available"] == "True", out
    # querying the accelerator does not initialize it either
    assert r["init_after_queries"] == "False", out
    assert r["device"] == "openreg:0", out
    assert r["values"] == "[1.0, 1.0]", out
    assert r["init_after_tensor"] == "True", out
    assert r["dev0_after_tensor"] == "True", out
    # devices start independently, at their first allocation
    assert r["dev1_after_tensor"] == "False", out
    assert r["dev1_after_tensor1"] == "True", out


@pytest.mark.slow
def test_autoload_disabled_then_explicit_import():
    out = check_ok(
        run_python(
            """
            import sys
            import torch
            print("loaded=", "torch_openreg" in sys.modules)
            try:
                torch.device("openreg")
            except RuntimeError as e:
                print("device_error=RuntimeError")
            else:
                print("device_error=none")
            try:
                torch.ones(2, device="openreg")
            except RuntimeError as e:
                print("tensor_error=RuntimeError")
            else:
                print("tensor_error=none")
            import torch_openreg
            print("device=", torch.device("openreg:1"))
            x = torch.arange(3, device="openreg") * 2
            print("values=", x.cpu().tolist(), x.device)
            print("accelerator=", torch.accelerator.current_accelerator().type)
            """,
            TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        )
    )
    r = parse_key_values(out)
    assert r["loaded"] == "False", out
    assert r["device_error"] == "RuntimeError", out
    assert r["tensor_error"] == "RuntimeError", out
    assert r["device"] == "openreg:1", out
    assert r["values"] == "[0, 2, 4] openreg:0", out
    assert r["accelerator"] == "openreg", out


@pytest.mark.slow
def test_import_twice_is_harmless():
    out = check_ok(
        run_python(
            """
            import importlib
            import torch
            import torch_openreg
            import torch_openreg as again
            print("same_module=", again is torch_openreg)
            x = torch.ones(3, device="openreg")
            importlib.reload(torch_openreg)  # runs the package code a second time
            import torch_openreg.openreg
            print("backend_name=", torch._C._get_privateuse1_backend_name())
            y = x + torch.ones(3, device="openreg")
            print("values=", y.cpu().tolist())
            print("initialized=", torch.openreg.is_initialized())
            print("count=", torch.openreg.device_count())
            print("is_openreg=", y.is_openreg)
            """
        )
    )
    r = parse_key_values(out)
    assert r["same_module"] == "True", out
    assert r["backend_name"] == "openreg", out
    assert r["values"] == "[2.0, 2.0, 2.0]", out
    assert r["initialized"] == "True", out
    assert r["count"] == "2", out
    assert r["is_openreg"] == "True", out


@pytest.mark.slow
def test_importing_the_package_before_torch():
    # torch's autoload runs while torch_openreg is still initializing.
    out = check_ok(
        run_python(
            """
        import torch_openreg
        import torch
        print((torch.ones(2, device="openreg") + 1).cpu().tolist())
        """
        )
    )
    assert out.strip() == "[2.0, 2.0]"
