"""Importing torch_openreg from a source checkout whose extension is not built.

Why: Python puts the working directory first on ``sys.path``, so ``python``,
``python -m pytest`` or ``python -m torch_openreg.testing`` started in the
repository root import the source folder ``torch_openreg/``, not the package
``pip install .`` built, and the source folder has no ``_C``. Such an import
hands over to the installed copy: it is loaded in place of the source folder,
which the import system allows (a module may replace itself in
``sys.modules`` while it is imported). Without an installed copy, the import
fails saying how to build one.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _has_extension(package_dir):
    return any(
        os.path.isfile(os.path.join(package_dir, "_C" + suffix)) for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def _built_copy_elsewhere(name, checkout_root):
    """The spec of a ``name`` package with a built extension on sys.path, outside ``checkout_root``."""
    for entry in sys.path:
        if os.path.realpath(entry or os.curdir) == checkout_root:
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, [entry])
        if spec is not None and spec.submodule_search_locations and _has_extension(spec.submodule_search_locations[0]):
            return spec
    return None


def defer_to_installed_copy(name, package_dir):
    """Returns False if ``package_dir`` has its extension; else imports the installed copy into sys.modules[name]
    and returns True, or raises ImportError saying how to build the extension."""
    package_dir = os.path.realpath(package_dir)
    if _has_extension(package_dir):
        return False
    checkout_root = os.path.dirname(package_dir)
    spec = _built_copy_elsewhere(name, checkout_root)
    if spec is None:
        raise ImportError(
            f"torch_openreg in {package_dir} has no built extension (_C) and no installed copy was found: "
            f"run `pip install .` (installs the package) or `python setup.py build_ext --inplace` (builds it in "
            f"place) in {checkout_root}",
            name=name,
        )
    installed = importlib.util.module_from_spec(spec)
    # In sys.modules before it runs: its `import torch` autoloads this package by name, which must find it.
    sys.modules[name] = installed
    spec.loader.exec_module(installed)
    return True
