"""How Inductor writes openreg's kernels: with its own C++/OpenMP CPU code
generator (``CppScheduling``), unchanged. openreg memory is host memory behind
a protected mapping, so the CPU's kernels are openreg's kernels once they get
host addresses (``wrapper.py``). A vendor with its own code generator replaces
this class and keeps the rest of the package."""

from torch._inductor.codegen.cpp import CppScheduling


class OpenRegScheduling(CppScheduling):
    pass
