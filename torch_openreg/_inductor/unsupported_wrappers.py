"""The wrapper openreg does not provide: Inductor's FX wrapper
(``torch._inductor.config.fx_wrapper = True``), which would call the kernels
without host access. Inductor asks the device module for it, so it is a
class that refuses with a message naming the device and the setting to
change. (The Python wrapper is ``wrapper.py``, the C++ wrapper and
AOTInductor ``cpp_wrapper.py``.)"""


class OpenRegWrapperFxCodegen:
    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        raise NotImplementedError(
            "torch.compile on the openreg device supports Inductor's Python and C++ wrappers; "
            "set torch._inductor.config.fx_wrapper = False (openreg's generated kernels must be called "
            "through host access, which the FX wrapper does not do)"
        )
