"""The suites' default dtypes and compile backend, in a module that imports nothing: the command line's
``--help`` shows them without importing the suites (and torch.testing._internal with them)."""

OPINFO_DTYPES = ("float32", "float64", "int64", "bool", "float16", "bfloat16", "complex64")
# Inductor's own OpInfo test compiles the function variant at these dtypes (bfloat16 is "not tested" there).
COMPILE_DTYPES = ("float16", "float32", "float64", "int32", "int64", "bool")
COMPILE_BACKEND = "inductor"
# compile --aoti: torch.export and AOTInductor packages instead of torch.compile.
COMPILE_AOTI = "aoti"
MODULE_DTYPES = ("float32", "float64")
OPTIMIZER_DTYPES = ("float32",)
