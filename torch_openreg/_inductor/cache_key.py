"""openreg's share of Inductor's FX graph cache key.

The FX graph cache keys a compiled graph on the graph, its inputs (device
included: an openreg entry never serves a CPU call or the reverse), Inductor's
configuration and torch's own sources, but knows nothing of the code openreg
adds to what Inductor generates: a cached entry written by another version of
this package (another wrapper, other overrides) would be served unchanged. The
one backend-specific part of the key in torch 2.13 is the uuid of the custom
pass registered with the backend (``register_backend_for_device``'s
``device_custom_pass``; FxGraphHashDetails.custom_backend_passes). This pass
changes nothing in the graph (torch 2.13 does not run backend passes; a later
torch that does runs a no-op): it exists for its uuid, the hash of the
package's sources: its Inductor modules and the C++ header the C++ wrapper
includes (``include/``, with the generated C shim).
"""

import functools
import pathlib

import torch
from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files


class OpenRegCodegenVersion(CustomGraphModulePass):
    def __call__(self, gm: torch.fx.GraphModule) -> None:
        pass

    @functools.cache
    def uuid(self) -> bytes:
        package = pathlib.Path(__file__).parent.parent
        sources = [*package.glob("_inductor/*.py"), *package.glob("include/**/*.h")]
        return get_hash_for_files(tuple(sorted(str(p) for p in sources)))
