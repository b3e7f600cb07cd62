"""The SM80-class path of kernels/cute_gemm.py: warp-level MMA (``mma.sync`` m16n8k16, fp32 accumulators).

    out = epilogue(a @ b + bias)        a: (M,K,L), b: (N,K,L) views with any strides, fp16/bf16

It serves GPUs of compute capability 8.x (Ampere, Ada), where the Hopper kernel's TMA and warpgroup MMA do
not exist, and on a Hopper GPU only when asked (``GEMMGUARD_CUTE_ARCH=sm80``: how this path is tested on
the H200, whose tensor cores run ``mma.sync`` too). Plain and general before fast:

* one CTA of four warps (their 16 x 8 MMA atoms laid 2 x 2, repeated over the 64 x 64 tile) per output
  tile, grid (tiles of M, tiles of N, batch);
* each K step, the CTA's threads copy a 64 x 32 tile of A and of B into shared memory one element each,
  reading through the operands' strides and writing zero past M, N or K: so any layout, any storage
  offset and ragged edges need no special case, and a case the Hopper kernel refuses for TMA's 16-byte
  rule (odd strides, unaligned offsets, a broadcast batch) runs here;
* the MMA reads its fragments from shared memory, then the epilogue (the same fp32 step chain as the
  Hopper kernel) stores each in-bounds element.

No cp.async pipeline and no swizzle yet: a fallback that is right everywhere, not a fast one.
Nothing CUDA or CuteDSL is imported at module import time.
"""

BM, BN, BK = 64, 64, 32
THREADS = 128  # four warps


def build(epilogue_apply, epilogue_views):
    """The kernel class; `epilogue_apply` is cute_gemm's fp32 step chain and `epilogue_views` its operands'
    tensors (both shared with the Hopper kernel)."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import warp
    from cutlass.memory import SmemAllocator

    Int32, Float32 = cutlass.Int32, cutlass.Float32

    @cute.jit
    def load_tile(src, dst, first, extent, k0, K, batch, tidx, zero):
        """Copy the (rows, BK) tile of `src` (a (row, K, batch) view) from row `first` and column `k0` into
        shared `dst`, one element per thread per pass, zero past `extent` rows or K columns."""
        for i in cutlass.range_constexpr(cute.size(dst) // THREADS):
            e = tidx + i * THREADS
            r = e // BK
            c = e - r * BK
            v = zero
            if first + r < extent and k0 + c < K:
                v = src[(first + r, k0 + c, batch)]
            dst[(r, c)] = v

    class Sm80Gemm:
        """One compiled variant: operand and output dtypes and the epilogue chain are compile-time."""

        def __init__(self, ab_dtype, out_dtype, bias_dtype, epi_bias_dtype, res_dtype, steps):
            self.ab_dtype = ab_dtype
            self.out_dtype = out_dtype
            self.has_bias = bias_dtype is not None
            self.steps = tuple(steps)
            self.smem_bytes = (BM + BN) * BK * ab_dtype.width // 8 + 128

        @cute.jit
        def __call__(
            self,
            pA: cute.Pointer,
            pB: cute.Pointer,
            pC: cute.Pointer,
            pBias: cute.Pointer,
            pEpiBias: cute.Pointer,
            pRes: cute.Pointer,
            M: Int32,
            N: Int32,
            K: Int32,
            L: Int32,
            sAM: Int32,
            sAK: Int32,
            sAL: Int32,
            sBN: Int32,
            sBK: Int32,
            sBL: Int32,
            sCM: Int32,
            sCL: Int32,
            sBiasM: Int32,
            sBiasN: Int32,
            sBiasL: Int32,
            sEpi: Int32,
            sResM: Int32,
            sResN: Int32,
            sResL: Int32,
            scale: Float32,
            stream: cuda.CUstream,
        ):
            # (row, reduction, batch) views, as the Hopper kernel takes them: A (M,K,L), B (N,K,L), C (M,N,L)
            mA = cute.make_tensor(pA, cute.make_layout((M, K, L), stride=(sAM, sAK, sAL)))
            mB = cute.make_tensor(pB, cute.make_layout((N, K, L), stride=(sBN, sBK, sBL)))
            mC = cute.make_tensor(pC, cute.make_layout((M, N, L), stride=(sCM, 1, sCL)))
            mBias, mEpiBias, mRes = epilogue_views(
                pBias, pEpiBias, pRes, M, N, L, (sBiasM, sBiasN, sBiasL), sEpi, (sResM, sResN, sResL)
            )
            tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(self.ab_dtype, Float32, (16, 8, 16)), (2, 2, 1))
            tiles_m = (M + BM - 1) // BM
            tiles_n = (N + BN - 1) // BN
            self.kernel(mA, mB, mC, mBias, mEpiBias, mRes, scale, tiled_mma, M, N, K).launch(
                grid=[tiles_m, tiles_n, L], block=[THREADS, 1, 1], smem=self.smem_bytes, stream=stream
            )

        @cute.kernel
        def kernel(
            self,
            mA: cute.Tensor,
            mB: cute.Tensor,
            mC: cute.Tensor,
            mBias: cute.Tensor,
            mEpiBias: cute.Tensor,
            mRes: cute.Tensor,
            scale: Float32,
            tiled_mma: cute.TiledMma,
            M: Int32,
            N: Int32,
            K: Int32,
        ):
            tidx, _, _ = cute.arch.thread_idx()
            tm, tn, batch = cute.arch.block_idx()
            smem = SmemAllocator()
            # K-major tiles: consecutive threads write consecutive K, as they read a K-major operand
            sA = smem.allocate_tensor(self.ab_dtype, cute.make_layout((BM, BK), stride=(BK, 1)), byte_alignment=16)
            sB = smem.allocate_tensor(self.ab_dtype, cute.make_layout((BN, BK), stride=(BK, 1)), byte_alignment=16)
            thr_mma = tiled_mma.get_slice(tidx)
            tCsA = thr_mma.partition_A(sA)
            tCsB = thr_mma.partition_B(sB)
            tCrA = tiled_mma.make_fragment_A(tCsA)
            tCrB = tiled_mma.make_fragment_B(tCsB)
            acc = tiled_mma.make_fragment_C(thr_mma.partition_shape_C((BM, BN)))
            acc.fill(0.0)
            row0 = tm * BM
            col0 = tn * BN
            zero = self.ab_dtype(0.0)
            for kt in cutlass.range((K + BK - 1) // BK, unroll=1):
                k0 = kt * BK
                load_tile(mA, sA, row0, M, k0, K, batch, tidx, zero)
                load_tile(mB, sB, col0, N, k0, K, batch, tidx, zero)
                cute.arch.sync_threads()
                cute.autovec_copy(tCsA, tCrA)
                cute.autovec_copy(tCsB, tCrB)
                cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
                cute.arch.sync_threads()  # every warp is done reading before the next tile lands
            tCcC = thr_mma.partition_C(cute.make_identity_tensor((BM, BN)))
            chain = (self.has_bias, self.steps)
            for i in cutlass.range_constexpr(cute.size(acc)):
                rr = row0 + tCcC[i][0]
                cc = col0 + tCcC[i][1]
                if rr < M and cc < N:
                    v = acc[i]
                    if cutlass.const_expr(self.has_bias or len(self.steps) > 0):
                        v = epilogue_apply(v, rr, cc, batch, chain, mBias, mEpiBias, mRes, scale)
                    mC[(rr, cc, batch)] = v.to(self.out_dtype)

    return Sm80Gemm
