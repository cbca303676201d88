#!/usr/bin/env bash
# session 13 call 8: the mma.sync rungs' gpu tests (SWIZZLE 0 and 1), ncu bank conflicts padded vs swizzled
set -u
XDIST=16 PYTEST='test_gpu_mma' PYTEST_LIMIT=110 NCU_LIMIT=75 \
  NCU_METRICS="gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" \
  NCU="b0=kernel=mma_bf16 precision=bf16 shape=[1024,1024,1024] kernel.SWIZZLE=0;b1=kernel=mma_bf16 precision=bf16 shape=[1024,1024,1024] kernel.SWIZZLE=1;t0=kernel=mma_tf32 precision=tf32 shape=[1024,1024,1024] kernel.SWIZZLE=0;t1=kernel=mma_tf32 precision=tf32 shape=[1024,1024,1024] kernel.SWIZZLE=1" \
  bash .ci/gpu-call
