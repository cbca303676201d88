// gemmlab built-in kernel "wgmma_tf32": the persistent warp-specialised wgmma GEMM of
// wgmma_bf16.cu with ELEM = 4 (float32 storage read as TF32 by wgmma m64nBNk8; B column-major only,
// TF32 wgmma has no transposed-operand mode). One template for both rungs; this file only names
// it after its kernel (every built-in kernel's source is kernels/<name>.cu).
#include "wgmma_bf16.cu"
