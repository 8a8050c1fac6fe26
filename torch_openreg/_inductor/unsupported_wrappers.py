"""The wrappers openreg does not provide: Inductor's C++ wrapper
(``torch._inductor.config.cpp_wrapper = True``, AOTInductor) and its FX
wrapper (``fx_wrapper = True``). Both would call the kernels without host
access. Inductor asks the device module for both, so each is a class that
refuses with a message naming the device and the setting to change."""


def _refuse(setting: str):
    raise NotImplementedError(
        f"torch.compile on the openreg device supports Inductor's Python wrapper only; "
        f"set torch._inductor.config.{setting} = False (openreg's generated kernels must be called "
        f"through host access, which only the Python wrapper does)"
    )


class OpenRegCppWrapperCodegen:
    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        _refuse("cpp_wrapper")


class OpenRegWrapperFxCodegen:
    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        _refuse("fx_wrapper")
