"""Registrations that run right after a module is imported, without importing it.

torch_openreg is imported by ``import torch`` (autoload), long before the
modules it registers with are needed: Dynamo and Inductor cost seconds to
import, and libraries such as Lightning may never be imported at all. A
registration for such a module runs at once if the module is already imported,
and otherwise right after the module's own code has run, on whichever import
comes first.

Only this module is imported with the package; it imports nothing of torch.
"""

import sys

_pending = {}  # module name -> [registration, ...]


class _RegisterAfterImport:
    """A ``sys.meta_path`` finder that finds nothing itself: for the modules of
    ``_pending`` it lets the other finders find the module and makes its loader
    run the registrations once the module has executed."""

    def find_spec(self, fullname, path, target=None):
        registrations = _pending.get(fullname)
        if registrations is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        # The loader object belongs to this one module: wrapping its
        # exec_module changes nothing for any other module.
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            for register in _pending.pop(fullname, ()):
                register()

        spec.loader.exec_module = exec_then_register
        return spec


_finder = _RegisterAfterImport()


def after_import(module_name: str, register) -> None:
    """Calls ``register()`` once ``module_name`` is imported: now, or right after its import."""
    if module_name in sys.modules:
        register()
        return
    _pending.setdefault(module_name, []).append(register)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
