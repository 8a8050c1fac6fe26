"""openreg in ``torch.compile``: the Dynamo device interface and the Inductor backend.

Inductor's C++/OpenMP CPU code generator writes the kernels; openreg supplies
what makes them run on device memory (the wrapper that calls each kernel on
host views, see ``wrapper.py``) and the narrow overrides where Inductor decides
"not CPU, therefore GPU" (``overrides.py``). ``registration.py`` says when and
how all of it is registered without slowing ``import torch``; docs/compile.md
explains the whole.

Nothing here is imported at ``import torch`` beyond ``registration.py``.
"""
