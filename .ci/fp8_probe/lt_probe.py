"""Probe kernels for the fp8 bound on the GPU (issue 42; .ci/fp8_probe.py loads this folder):
cuBLASLt's FP8 GEMM declaring a promotion every 128 of K, with fast accumulation off (cuBLASLt
promotes its partial sums periodically) and on ("will not periodically be promoted": the real
hardware's non-promoting mutant)."""

from gemmlab.contract.hookspecs import LibraryKernelSpec, hookimpl


@hookimpl
def gemmlab_kernels():
    import importlib.util
    import pathlib
    import sys
    path = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "cublas.py"
    spec = importlib.util.spec_from_file_location("gemmlab_probe_cublas", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # before it runs: its dataclasses look their module up there
    spec.loader.exec_module(mod)

    class Probe(LibraryKernelSpec):
        fast = False

        def library_version(self):
            return "cuBLASLt probe (fast accumulation " + ("on" if self.fast else "off") + ")"

        def check_problem(self, problem, params, device):
            mod.fp8_refusal(problem, device.arch)

        def enqueue_problem(self, problem, params, pointers):
            return mod.Fp8Plan.make(problem, pointers, fast_accum=self.fast).functions()

    class Fast(Probe):
        fast = True

    common = dict(precisions=("fp8",), layouts=(("row", "col"),), fp8_accumulation=128)
    return [Probe(name="lt_claims128", description="probe: cuBLASLt FP8, declares promotion every 128", **common),
            Fast(name="lt_fast_claims128", description="probe: cuBLASLt FP8 fast accumulation, declares 128", **common)]
