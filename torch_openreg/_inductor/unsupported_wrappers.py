"""The wrapper openreg does not provide: Inductor's FX wrapper
(``torch._inductor.config.fx_wrapper = True``). It converts Triton kernels
only, and openreg's kernels are Inductor's C++ kernels: on the CPU, whose
kernels they are, the same setting fails with Inductor's "FX conversion only
supports Triton kernels." Inductor asks the device module for an FX wrapper
class, so this one refuses at once, naming the device and the setting.
(The Python wrapper is ``wrapper.py``, the C++ wrapper and AOTInductor
``cpp_wrapper.py``.)"""


class OpenRegWrapperFxCodegen:
    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        raise NotImplementedError(
            "torch.compile on the openreg device supports Inductor's Python and C++ wrappers; "
            "set torch._inductor.config.fx_wrapper = False (the FX wrapper converts Triton kernels only, and "
            "openreg's kernels are Inductor's C++ kernels, as the CPU's are)"
        )
