"""Device-generic correctness suites for openreg, driven by PyTorch's own test data.

``python -m torch_openreg.testing {opinfo,modules,optim,compile,external,fuzz}``:
OpInfo operators, ModuleInfo modules and OptimizerInfo optimizers run on openreg
and on the CPU and are compared, case by case, in crash-isolated worker
processes; ``compile`` runs the OpInfo operators through ``torch.compile`` on
openreg against eager CPU;
``external`` runs a PyTorch device-generic test file for openreg; ``fuzz`` runs
random operator programs on both and shrinks each divergence to a reproducer.
See ``docs/testing.md``.
"""
