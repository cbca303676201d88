"""Session 18 probe: does NVRTC (13.0 on the H200 image) return the ptxas report for a program with
one vs several name expressions, and for a repeat? Prints one line per compile."""
import sys
sys.path.insert(0, "tests")
from test_tckernels import spec, params, FACTS
from gemmlab.gpu.compile import CompileOptions, compile_kernel, nvrtc_version
from gemmlab.paths import KERNELS_DIR
from gemmlab.contract.hookspecs import Extra, Problem, Shape
print("nvrtc", nvrtc_version())
def go(name, problem, extras=None, label=""):
    s, p = spec(name), params(name)
    if extras is None:
        extras = tuple(step.entry for step in s.plan(problem, p, FACTS) if isinstance(step, Extra))
    options = CompileOptions.for_kernel("90", s.options(problem, p, FACTS))
    c = compile_kernel(KERNELS_DIR / s.source, s.instance(problem, p), options, extra_names=extras, persistent=False)
    print(f"{label:10s} {name:14s} names={1 + len(extras)} log={len(c.log or '')} resources={'yes' if c.resources else 'NONE'}")
go("splitk", Problem(Shape(64, 64, 4096)), (), "alone")
go("splitk", Problem(Shape(64, 64, 4096)), None, "+reduce")
go("splitk", Problem(Shape(64, 64, 4096)), (), "alone-rep")
go("streamk", Problem(Shape(1024, 1024, 1024)), None, "+fixup")
go("streamk", Problem(Shape(1024, 1024, 1024)), (), "alone")
go("wgmma_bf16", Problem(Shape(35, 79, 19), "bf16", "row", "col"), None, "+relayout")
go("wgmma_bf16", Problem(Shape(4096, 4096, 4096), "bf16", "row", "col"), None, "plain")
