// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// TILE_K, TRD_X_DIM, TRD_Y_DIM, TRD_CHUNK, NUM_STAGES, OFFSET_AMOUNT, SWIZZLE_WIDTH, WARP_X_DIM
// and WARP_Y_DIM are tuning parameters as well.

// Row-major accessors: A is M x K, B is K x N, C is M x N.
#define A_AT(row, col) (A[(row) * K + (col)])
#define B_AT(row, col) (B[(row) * N + (col)])
#define C_AT(row, col) (C[(row) * N + (col)])

// Block tile of C: each thread computes TRD_Y_DIM x TRD_X_DIM outputs.
#define BLOCK_TILE_M (BLOCK_Y * TRD_Y_DIM)
#define BLOCK_TILE_N (BLOCK_X * TRD_X_DIM)

// Threads of the block and the thread's linear index (consecutive x are consecutive).
#define THREADS_PER_BLOCK ((BLOCK_X) * (BLOCK_Y))
#define THREAD_LINEAR ((int)threadIdx.y * (BLOCK_X) + (int)threadIdx.x)

// Output tiles of C in each dimension.
#define TILES_M ((M + BLOCK_TILE_M - 1) / BLOCK_TILE_M)
#define TILES_N ((N + BLOCK_TILE_N - 1) / BLOCK_TILE_N)

// First row and column of C covered by this block's tile: the swizzled tile, computed once at
// the start of the kernel into the local variables block_row0 and block_col0.
#define BLOCK_ROW0 (block_row0)
#define BLOCK_COL0 (block_col0)

// Shared tiles, NUM_STAGES stages of each: a stage of A_TILE is stored k-major (transposed):
// the BLOCK_TILE_M rows of one k are consecutive, and consecutive k start A_TILE_PITCH elements
// apart. A stage of B_TILE is TILE_K rows of BLOCK_TILE_N (row-major), consecutive k starting
// B_TILE_PITCH elements apart. Both pitches are padded by OFFSET_AMOUNT elements against bank
// conflicts (the padding is never read or written). Stage s starts at element
// s * A_STAGE_SIZE of A_TILE (s * B_STAGE_SIZE of B_TILE). Both are declared __align__(16).
#define A_TILE_PITCH (BLOCK_TILE_M + OFFSET_AMOUNT)
#define B_TILE_PITCH (BLOCK_TILE_N + OFFSET_AMOUNT)
#define A_STAGE_SIZE (TILE_K * A_TILE_PITCH)
#define B_STAGE_SIZE (TILE_K * B_TILE_PITCH)
#define A_TILE_AT(s, row, k) (A_TILE[(s) * A_STAGE_SIZE + (k) * (A_TILE_PITCH) + (row)])
#define B_TILE_AT(s, k, col) (B_TILE[(s) * B_STAGE_SIZE + (k) * (B_TILE_PITCH) + (col)])

// 16-byte views of the shared tiles in stage s: rows row .. row + 3 of k of the A tile,
// columns col .. col + 3 of k of the B tile (row and col multiples of 4).
#define A_TILE_VEC(s, row, k) \
  (*reinterpret_cast<float4*>(&A_TILE[(s) * A_STAGE_SIZE + (k) * (A_TILE_PITCH) + (row)]))
#define B_TILE_VEC(s, k, col) \
  (*reinterpret_cast<float4*>(&B_TILE[(s) * B_STAGE_SIZE + (k) * (B_TILE_PITCH) + (col)]))

// Number of K tiles.
#define K_TILES (((K) + TILE_K - 1) / TILE_K)

// Elements of each tile that one thread stages in registers: element l of a thread is tile
// element THREAD_LINEAR + l * THREADS_PER_BLOCK.
#define A_LOADS (BLOCK_TILE_M * TILE_K / THREADS_PER_BLOCK)
#define B_LOADS (TILE_K * BLOCK_TILE_N / THREADS_PER_BLOCK)

// The same elements in quads of 4 consecutive elements of a row: A_QUADS of A and B_QUADS of B
// per thread and tile.
#define A_QUADS (A_LOADS / 4)
#define B_QUADS (B_LOADS / 4)

// 16-byte views of A and B at row, columns col .. col + 3: valid only when the row length (K
// for A, N for B) and col are multiples of 4.
#define A_VEC_AT(row, col) (*reinterpret_cast<const float4*>(&A_AT(row, col)))
#define B_VEC_AT(row, col) (*reinterpret_cast<const float4*>(&B_AT(row, col)))

// 16-byte view of C at row, columns col .. col + 3: valid only when N % 4 == 0 and
// col % 4 == 0.
#define C_VEC(row, col) (*reinterpret_cast<float4*>(&C_AT(row, col)))

// Warp tiling: the WARP_X_DIM * WARP_Y_DIM consecutive threads of a warp (in THREAD_LINEAR
// order) take a WARP_Y_DIM x WARP_X_DIM patch of the block's thread grid, at (THREAD_X, THREAD_Y).
#define WARP_ID (THREAD_LINEAR / (WARP_X_DIM * WARP_Y_DIM))
#define LANE_ID (THREAD_LINEAR % (WARP_X_DIM * WARP_Y_DIM))
#define THREAD_X ((WARP_ID % (BLOCK_X / WARP_X_DIM)) * WARP_X_DIM + LANE_ID % WARP_X_DIM)
#define THREAD_Y ((WARP_ID / (BLOCK_X / WARP_X_DIM)) * WARP_Y_DIM + LANE_ID / WARP_X_DIM)

// The thread's outputs (i, j) come in chunks of TRD_CHUNK contiguous rows and columns; the
// chunks of the threads of the block are interleaved across the block tile.
#define THREAD_TILE_ROW(i) \
  (((i) / TRD_CHUNK) * (BLOCK_Y * TRD_CHUNK) + THREAD_Y * TRD_CHUNK + (i) % TRD_CHUNK)
#define THREAD_TILE_COL(j) \
  (((j) / TRD_CHUNK) * (BLOCK_X * TRD_CHUNK) + THREAD_X * TRD_CHUNK + (j) % TRD_CHUNK)
#define THREAD_ROW(i) (BLOCK_ROW0 + THREAD_TILE_ROW(i))
#define THREAD_COL(j) (BLOCK_COL0 + THREAD_TILE_COL(j))

// First output of the thread.
#define C_ROW (THREAD_ROW(0))
#define C_COL (THREAD_COL(0))

// Stream-K schedule: iteration i is K tile i % K_TILES of output tile i / K_TILES; block b of the
// gridDim.x blocks takes iterations ITER_BEGIN(b) .. ITER_BEGIN(b + 1) - 1.
#define TILES_TOTAL (TILES_M * TILES_N)
#define ITERS_TOTAL (TILES_TOTAL * K_TILES)
#define ITER_BEGIN(b) ((int)((long long)ITERS_TOTAL * (long long)(b) / (long long)gridDim.x))

// Element e (e = i * TRD_X_DIM + j) of the calling thread's tile in block b's slice of the
// scratch buffer `partial`: consecutive threads of a block touch consecutive floats.
#define PARTIAL_AT(b, e) \
  (partial[((size_t)(b) * (TRD_Y_DIM * TRD_X_DIM) + (e)) * THREADS_PER_BLOCK + THREAD_LINEAR])
// Small-M path, for shapes of at most SMALL_M_ROWS rows (M <= SMALL_M_ROWS): a block of
// SMALL_M_THREADS threads (32 x SMALL_M_WARPS) computes all M rows of SMALL_M_COLS columns of C
// over one split of K, lane l taking the 4 columns 4 * l .. 4 * l + 3 of the block's columns.
#define SMALL_M_COLS 128
#define SMALL_M_THREADS (32 * SMALL_M_WARPS)
// Split s of K covers k = SMALL_K0(s) .. SMALL_K1(s) - 1; SMALL_K_PER_SPLIT is a multiple of 4.
#define SMALL_K_PER_SPLIT ((((K) + SMALL_M_SPLITS - 1) / SMALL_M_SPLITS + 3) / 4 * 4)
#define SMALL_K0(s) ((s) * SMALL_K_PER_SPLIT)
#define SMALL_K1(s) ((K) < SMALL_K0(s) + SMALL_K_PER_SPLIT ? (K) : SMALL_K0(s) + SMALL_K_PER_SPLIT)
// The partial sum of split s at row r, column c in the scratch buffer small_partial.
#define SMALL_PARTIAL_AT(s, r, c) (small_partial[((size_t)(s) * M + (r)) * N + (c)])

// peak helper: cp-async
// Asynchronous global-to-shared copies (cp.async, sm_80 and later). cp_async_4 copies the 4 bytes
// at src to dst in shared memory when valid, else writes 0 to dst and reads nothing (src must
// still be an address inside the array: pass the array itself). The copies a thread issued since
// its last cp_async_commit() form one group; cp_async_wait<N>() returns when at most N of the
// thread's groups are still in flight. Other threads see the data only after a barrier.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// end of helper cp-async
// Each thread computes TRD_Y_DIM x TRD_X_DIM elements of C, in chunks of TRD_CHUNK contiguous
// rows and columns of the block's tile, read from shared memory and written to C 16 bytes at a
// time. The operands of TRD_K_DIM consecutive k are read into registers before their
// multiply-adds. The K tiles pass through NUM_STAGES shared stages: the global values of tile
// t + NUM_STAGES - 1 are loaded into registers, 16 bytes at a time where the rows are aligned,
// before tile t is computed and stored into their stage after it. The operands are
// double-buffered in registers: each group of TRD_K_DIM steps of k is read from shared memory
// one group ahead of its multiply-adds, and the first group of the next tile is read right after
// the tile's barrier, while the multiply-adds of the last group run.
// Output tiles are numbered in groups of SWIZZLE_WIDTH tile rows, walking down a group before
// moving to the next tile column. The launch bounds let the compiler fit MIN_BLOCKS blocks of
// THREADS_PER_BLOCK threads on a multiprocessor.
// Stream-K: one block per multiprocessor; block b computes the K iterations ITER_BEGIN(b) ..
// ITER_BEGIN(b + 1) - 1 of all tiles, one segment per tile it touches. A segment that does not
// start at K tile 0 is a contribution: its accumulators go to the block's slice of `partial` and
// its flag is set. The segment that starts at K tile 0 owns the tile: it adds the contributions
// of the blocks after it, in block order, and stores C.
__global__ void __launch_bounds__(THREADS_PER_BLOCK, MIN_BLOCKS)
    matmul(const float* A, const float* B, float* C, float* partial, int* flags, int M, int N,
           int K) {
  __shared__ __align__(16) float A_TILE[NUM_STAGES * A_STAGE_SIZE];
  __shared__ __align__(16) float B_TILE[NUM_STAGES * B_STAGE_SIZE];
  float acc[TRD_Y_DIM][TRD_X_DIM];
  // Operand registers, two buffers: group g of a tile lives in buffer g % 2.
  float a[2][TRD_K_DIM][TRD_Y_DIM];
  float b[2][TRD_K_DIM][TRD_X_DIM];
  // The staged global values of one tile in quads (quad l: q = THREAD_LINEAR + l *
  // THREADS_PER_BLOCK), zero outside A and B.
  float4 a_stage[A_QUADS];
  float4 b_stage[B_QUADS];
  const int blk = (int)blockIdx.x;
  const int iter_end = ITER_BEGIN(blk + 1);
  for (int iter = ITER_BEGIN(blk); iter < iter_end;) {
    // This segment: K tiles k_begin .. k_end - 1 of output tile `tile`.
    const int tile = iter / K_TILES;
    const int k_begin = iter % K_TILES;
    const int k_end = min(K_TILES, k_begin + (iter_end - iter));
    iter += k_end - k_begin;
    // The previous segment's stages are about to be refilled.
    __syncthreads();
    // The swizzled output tile of this tile index.
    const int group = tile / (SWIZZLE_WIDTH * TILES_N);
    const int first = group * SWIZZLE_WIDTH;
    const int rows = min(TILES_M - first, SWIZZLE_WIDTH);
    const int in_group = tile % (SWIZZLE_WIDTH * TILES_N);
    const int block_row0 = (first + in_group % rows) * BLOCK_TILE_M;
    const int block_col0 = (in_group / rows) * BLOCK_TILE_N;
#pragma unroll
    for (int i = 0; i < TRD_Y_DIM; ++i)
#pragma unroll
      for (int j = 0; j < TRD_X_DIM; ++j) acc[i][j] = 0.0f;

    // Prologue: K tiles k_begin .. k_begin + NUM_STAGES - 2 into stages 0 .. NUM_STAGES - 2.
    for (int s = 0; s < NUM_STAGES - 1; ++s) {
      if (k_begin + s < k_end) {
        // A: the whole tile inside A with aligned rows takes 16-byte loads without checks.
        const bool a_full = BLOCK_ROW0 + BLOCK_TILE_M <= M && (k_begin + s + 1) * TILE_K <= K && K % 4 == 0;
        if (a_full) {
#pragma unroll
          for (int l = 0; l < A_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = BLOCK_ROW0 + q / (TILE_K / 4);
            int c = (k_begin + s) * TILE_K + (q % (TILE_K / 4)) * 4;
            a_stage[l] = A_VEC_AT(r, c);
          }
        } else {
#pragma unroll
          for (int l = 0; l < A_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = BLOCK_ROW0 + q / (TILE_K / 4);
            int c = (k_begin + s) * TILE_K + (q % (TILE_K / 4)) * 4;
            if (r < M && K % 4 == 0 && c < K) {
              a_stage[l] = A_VEC_AT(r, c);
            } else {
              a_stage[l] = make_float4((r < M && c < K) ? A_AT(r, c) : 0.0f,
                                       (r < M && c + 1 < K) ? A_AT(r, c + 1) : 0.0f,
                                       (r < M && c + 2 < K) ? A_AT(r, c + 2) : 0.0f,
                                       (r < M && c + 3 < K) ? A_AT(r, c + 3) : 0.0f);
            }
          }
        }
        // B: likewise for the B tile.
        const bool b_full = (k_begin + s + 1) * TILE_K <= K && BLOCK_COL0 + BLOCK_TILE_N <= N && N % 4 == 0;
        if (b_full) {
#pragma unroll
          for (int l = 0; l < B_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = (k_begin + s) * TILE_K + q / (BLOCK_TILE_N / 4);
            int c = BLOCK_COL0 + (q % (BLOCK_TILE_N / 4)) * 4;
            b_stage[l] = B_VEC_AT(r, c);
          }
        } else {
#pragma unroll
          for (int l = 0; l < B_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = (k_begin + s) * TILE_K + q / (BLOCK_TILE_N / 4);
            int c = BLOCK_COL0 + (q % (BLOCK_TILE_N / 4)) * 4;
            if (r < K && N % 4 == 0 && c < N) {
              b_stage[l] = B_VEC_AT(r, c);
            } else {
              b_stage[l] = make_float4((r < K && c < N) ? B_AT(r, c) : 0.0f,
                                       (r < K && c + 1 < N) ? B_AT(r, c + 1) : 0.0f,
                                       (r < K && c + 2 < N) ? B_AT(r, c + 2) : 0.0f,
                                       (r < K && c + 3 < N) ? B_AT(r, c + 3) : 0.0f);
            }
          }
        }
#pragma unroll
        for (int l = 0; l < A_QUADS; ++l) {
          int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
          int tr = q / (TILE_K / 4);
          int kq = (q % (TILE_K / 4)) * 4;
          A_TILE_AT(s, tr, kq + 0) = a_stage[l].x;
          A_TILE_AT(s, tr, kq + 1) = a_stage[l].y;
          A_TILE_AT(s, tr, kq + 2) = a_stage[l].z;
          A_TILE_AT(s, tr, kq + 3) = a_stage[l].w;
        }
#pragma unroll
        for (int l = 0; l < B_QUADS; ++l) {
          int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
          int tr = q / (BLOCK_TILE_N / 4);
          int nq = (q % (BLOCK_TILE_N / 4)) * 4;
          B_TILE_VEC(s, tr, nq) = b_stage[l];
        }
      }
    }
    __syncthreads();
    // Group 0 of K tile k_begin (stage 0) into buffer 0.
    if (k_end > k_begin) {
#pragma unroll
      for (int kk = 0; kk < TRD_K_DIM; ++kk) {
#pragma unroll
        for (int c = 0; c < TRD_Y_DIM; c += 4) {
          float4 v = A_TILE_VEC(0, THREAD_TILE_ROW(c), 0 * TRD_K_DIM + kk);
          a[0][kk][c + 0] = v.x;
          a[0][kk][c + 1] = v.y;
          a[0][kk][c + 2] = v.z;
          a[0][kk][c + 3] = v.w;
        }
#pragma unroll
        for (int c = 0; c < TRD_X_DIM; c += 4) {
          float4 v = B_TILE_VEC(0, 0 * TRD_K_DIM + kk, THREAD_TILE_COL(c));
          b[0][kk][c + 0] = v.x;
          b[0][kk][c + 1] = v.y;
          b[0][kk][c + 2] = v.z;
          b[0][kk][c + 3] = v.w;
        }
      }
    }

    for (int t = k_begin; t < k_end; ++t) {
      int st = (t - k_begin) % NUM_STAGES;
      int tn = t + NUM_STAGES - 1;
      // Load tile tn into registers; the loads are in flight while tile t is computed.
      if (tn < k_end) {
        // A: the whole tile inside A with aligned rows takes 16-byte loads without checks.
        const bool a_full = BLOCK_ROW0 + BLOCK_TILE_M <= M && (tn + 1) * TILE_K <= K && K % 4 == 0;
        if (a_full) {
#pragma unroll
          for (int l = 0; l < A_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = BLOCK_ROW0 + q / (TILE_K / 4);
            int c = tn * TILE_K + (q % (TILE_K / 4)) * 4;
            a_stage[l] = A_VEC_AT(r, c);
          }
        } else {
#pragma unroll
          for (int l = 0; l < A_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = BLOCK_ROW0 + q / (TILE_K / 4);
            int c = tn * TILE_K + (q % (TILE_K / 4)) * 4;
            if (r < M && K % 4 == 0 && c < K) {
              a_stage[l] = A_VEC_AT(r, c);
            } else {
              a_stage[l] = make_float4((r < M && c < K) ? A_AT(r, c) : 0.0f,
                                       (r < M && c + 1 < K) ? A_AT(r, c + 1) : 0.0f,
                                       (r < M && c + 2 < K) ? A_AT(r, c + 2) : 0.0f,
                                       (r < M && c + 3 < K) ? A_AT(r, c + 3) : 0.0f);
            }
          }
        }
        // B: likewise for the B tile.
        const bool b_full = (tn + 1) * TILE_K <= K && BLOCK_COL0 + BLOCK_TILE_N <= N && N % 4 == 0;
        if (b_full) {
#pragma unroll
          for (int l = 0; l < B_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = tn * TILE_K + q / (BLOCK_TILE_N / 4);
            int c = BLOCK_COL0 + (q % (BLOCK_TILE_N / 4)) * 4;
            b_stage[l] = B_VEC_AT(r, c);
          }
        } else {
#pragma unroll
          for (int l = 0; l < B_QUADS; ++l) {
            int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
            int r = tn * TILE_K + q / (BLOCK_TILE_N / 4);
            int c = BLOCK_COL0 + (q % (BLOCK_TILE_N / 4)) * 4;
            if (r < K && N % 4 == 0 && c < N) {
              b_stage[l] = B_VEC_AT(r, c);
            } else {
              b_stage[l] = make_float4((r < K && c < N) ? B_AT(r, c) : 0.0f,
                                       (r < K && c + 1 < N) ? B_AT(r, c + 1) : 0.0f,
                                       (r < K && c + 2 < N) ? B_AT(r, c + 2) : 0.0f,
                                       (r < K && c + 3 < N) ? B_AT(r, c + 3) : 0.0f);
            }
          }
        }
      }
      // Compute tile t from its stage: groups 0 .. G - 2, each after reading the next group.
#pragma unroll
      for (int g = 0; g < TILE_K / TRD_K_DIM - 1; ++g) {
#pragma unroll
        for (int kk = 0; kk < TRD_K_DIM; ++kk) {
#pragma unroll
          for (int c = 0; c < TRD_Y_DIM; c += 4) {
            float4 v = A_TILE_VEC(st, THREAD_TILE_ROW(c), (g + 1) * TRD_K_DIM + kk);
            a[(g + 1) % 2][kk][c + 0] = v.x;
            a[(g + 1) % 2][kk][c + 1] = v.y;
            a[(g + 1) % 2][kk][c + 2] = v.z;
            a[(g + 1) % 2][kk][c + 3] = v.w;
          }
#pragma unroll
          for (int c = 0; c < TRD_X_DIM; c += 4) {
            float4 v = B_TILE_VEC(st, (g + 1) * TRD_K_DIM + kk, THREAD_TILE_COL(c));
            b[(g + 1) % 2][kk][c + 0] = v.x;
            b[(g + 1) % 2][kk][c + 1] = v.y;
            b[(g + 1) % 2][kk][c + 2] = v.z;
            b[(g + 1) % 2][kk][c + 3] = v.w;
          }
        }
#pragma unroll
        for (int kk = 0; kk < TRD_K_DIM; ++kk)
#pragma unroll
          for (int i = 0; i < TRD_Y_DIM; ++i)
#pragma unroll
            for (int j = 0; j < TRD_X_DIM; ++j) acc[i][j] += a[g % 2][kk][i] * b[g % 2][kk][j];
      }
      // The last group, G - 1, is already in buffer 1. First store the staged tile tn into its
      // stage (last read while computing tile t - 1, before the previous iteration's barrier).
      if (tn < k_end) {
        int sn = (tn - k_begin) % NUM_STAGES;
#pragma unroll
        for (int l = 0; l < A_QUADS; ++l) {
          int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
          int tr = q / (TILE_K / 4);
          int kq = (q % (TILE_K / 4)) * 4;
          A_TILE_AT(sn, tr, kq + 0) = a_stage[l].x;
          A_TILE_AT(sn, tr, kq + 1) = a_stage[l].y;
          A_TILE_AT(sn, tr, kq + 2) = a_stage[l].z;
          A_TILE_AT(sn, tr, kq + 3) = a_stage[l].w;
        }
#pragma unroll
        for (int l = 0; l < B_QUADS; ++l) {
          int q = THREAD_LINEAR + l * THREADS_PER_BLOCK;
          int tr = q / (BLOCK_TILE_N / 4);
          int nq = (q % (BLOCK_TILE_N / 4)) * 4;
          B_TILE_VEC(sn, tr, nq) = b_stage[l];
        }
      }
      // The stored tile becomes visible, and tile t's stage is free to be refilled.
      __syncthreads();
      // Group 0 of the next tile into buffer 0, read while the last group's multiply-adds run.
      if (t + 1 < k_end) {
        int sn1 = (t + 1 - k_begin) % NUM_STAGES;
#pragma unroll
        for (int kk = 0; kk < TRD_K_DIM; ++kk) {
#pragma unroll
          for (int c = 0; c < TRD_Y_DIM; c += 4) {
            float4 v = A_TILE_VEC(sn1, THREAD_TILE_ROW(c), 0 * TRD_K_DIM + kk);
            a[0][kk][c + 0] = v.x;
            a[0][kk][c + 1] = v.y;
            a[0][kk][c + 2] = v.z;
            a[0][kk][c + 3] = v.w;
          }
#pragma unroll
          for (int c = 0; c < TRD_X_DIM; c += 4) {
            float4 v = B_TILE_VEC(sn1, 0 * TRD_K_DIM + kk, THREAD_TILE_COL(c));
            b[0][kk][c + 0] = v.x;
            b[0][kk][c + 1] = v.y;
            b[0][kk][c + 2] = v.z;
            b[0][kk][c + 3] = v.w;
          }
        }
      }
#pragma unroll
      for (int kk = 0; kk < TRD_K_DIM; ++kk)
#pragma unroll
        for (int i = 0; i < TRD_Y_DIM; ++i)
#pragma unroll
          for (int j = 0; j < TRD_X_DIM; ++j) acc[i][j] += a[1][kk][i] * b[1][kk][j];
    }
    if (k_begin != 0) {
      // A contribution: the accumulators into this block's slice of `partial`, then the flag.
#pragma unroll
      for (int i = 0; i < TRD_Y_DIM; ++i)
#pragma unroll
        for (int j = 0; j < TRD_X_DIM; ++j) PARTIAL_AT(blk, i * TRD_X_DIM + j) = acc[i][j];
      __threadfence();
      __syncthreads();
      if (THREAD_LINEAR == 0) atomicExch(&flags[blk], 1);
      continue;
    }
    // The owner: add the contributions of the blocks after this one that hold the rest of the
    // tile, in block order.
    const int tile_end = (tile + 1) * K_TILES;
    for (int c = blk + 1; c < (int)gridDim.x && ITER_BEGIN(c) < tile_end; ++c) {
      if (ITER_BEGIN(c + 1) == ITER_BEGIN(c)) continue;  // an empty range contributes nothing
      if (THREAD_LINEAR == 0) {
        while (atomicAdd(&flags[c], 0) == 0) {
        }
        __threadfence();
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < TRD_Y_DIM; ++i)
#pragma unroll
        for (int j = 0; j < TRD_X_DIM; ++j) acc[i][j] += __ldcg(&PARTIAL_AT(c, i * TRD_X_DIM + j));
    }
    // Store C: 4 columns at a time where aligned and inside C, else element by element.
#pragma unroll
    for (int i = 0; i < TRD_Y_DIM; ++i) {
      int row = THREAD_ROW(i);
      if (row >= M) continue;
#pragma unroll
      for (int j = 0; j < TRD_X_DIM; j += 4) {
        int col = THREAD_COL(j);
        if (N % 4 == 0 && col < N) {
          C_VEC(row, col) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (col + q < N) C_AT(row, col + q) = acc[i][j + q];
        }
      }
    }
  }
}
// Small-M path (M <= SMALL_M_ROWS, e.g. one decode step): the tiled kernel's BLOCK_TILE_M-row
// tiles would compute many times the rows C has. Here block (x, s) computes the M rows of columns
// x * SMALL_M_COLS .. + SMALL_M_COLS - 1 over split s of K. Its warps share the split: warp w
// takes the quads of k starting at SMALL_K0(s) + 4 * w, then every 4 * SMALL_M_WARPS; each lane
// reads 4 columns of 4 rows of B (16-byte loads where aligned) and 4 k of each row of A, and
// keeps SMALL_M_ROWS x 4 sums. The warps' sums are added in shared memory in warp order, and the
// block writes C (one split) or its split's partial sums, which reduce_small_m adds in split
// order.
__global__ void __launch_bounds__(SMALL_M_THREADS)
    matmul_small_m(const float* A, const float* B, float* C, float* small_partial, int M, int N,
                   int K) {
  __shared__ __align__(16) float red[SMALL_M_ROWS * SMALL_M_COLS];
  const int lane = (int)threadIdx.x;
  const int warp = (int)threadIdx.y;
  const int split = (int)blockIdx.y;
  const int col = (int)blockIdx.x * SMALL_M_COLS + lane * 4;
  const int k0 = SMALL_K0(split);
  const int k1 = SMALL_K1(split);
  const bool b_vec = N % 4 == 0 && col < N;
  float acc[SMALL_M_ROWS][4];
#pragma unroll
  for (int r = 0; r < SMALL_M_ROWS; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[r][j] = 0.0f;

  for (int k = k0 + 4 * warp; k < k1; k += 4 * SMALL_M_WARPS) {
    // 4 rows of B (zero past the split's end or past N).
    float4 b[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int kq = k + q;
      if (kq < k1 && b_vec) {
        b[q] = __ldg(&B_VEC_AT(kq, col));
      } else {
        b[q] = make_float4((kq < k1 && col < N) ? __ldg(&B_AT(kq, col)) : 0.0f,
                           (kq < k1 && col + 1 < N) ? __ldg(&B_AT(kq, col + 1)) : 0.0f,
                           (kq < k1 && col + 2 < N) ? __ldg(&B_AT(kq, col + 2)) : 0.0f,
                           (kq < k1 && col + 3 < N) ? __ldg(&B_AT(kq, col + 3)) : 0.0f);
      }
    }
    const bool a_vec = K % 4 == 0 && k + 4 <= k1;
#pragma unroll
    for (int r = 0; r < SMALL_M_ROWS; ++r) {
      if (r < M) {
        float4 a;
        if (a_vec) {
          a = __ldg(&A_VEC_AT(r, k));
        } else {
          a = make_float4(k < k1 ? __ldg(&A_AT(r, k)) : 0.0f,
                          k + 1 < k1 ? __ldg(&A_AT(r, k + 1)) : 0.0f,
                          k + 2 < k1 ? __ldg(&A_AT(r, k + 2)) : 0.0f,
                          k + 3 < k1 ? __ldg(&A_AT(r, k + 3)) : 0.0f);
        }
        acc[r][0] += a.x * b[0].x + a.y * b[1].x + a.z * b[2].x + a.w * b[3].x;
        acc[r][1] += a.x * b[0].y + a.y * b[1].y + a.z * b[2].y + a.w * b[3].y;
        acc[r][2] += a.x * b[0].z + a.y * b[1].z + a.z * b[2].z + a.w * b[3].z;
        acc[r][3] += a.x * b[0].w + a.y * b[1].w + a.z * b[2].w + a.w * b[3].w;
      }
    }
  }

  // The warps' sums, added in shared memory in warp order.
  for (int w = 0; w < SMALL_M_WARPS; ++w) {
    if (warp == w) {
#pragma unroll
      for (int r = 0; r < SMALL_M_ROWS; ++r) {
        float4* p = reinterpret_cast<float4*>(&red[r * SMALL_M_COLS + lane * 4]);
        float4 v = w == 0 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *p;
        *p = make_float4(v.x + acc[r][0], v.y + acc[r][1], v.z + acc[r][2], v.w + acc[r][3]);
      }
    }
    __syncthreads();
  }

  // The block's M x SMALL_M_COLS sums to C (one split) or to its split's partial sums.
  for (int q = warp * 32 + lane; q < SMALL_M_ROWS * (SMALL_M_COLS / 4); q += SMALL_M_THREADS) {
    const int r = q / (SMALL_M_COLS / 4);
    const int c = (int)blockIdx.x * SMALL_M_COLS + (q % (SMALL_M_COLS / 4)) * 4;
    if (r >= M || c >= N) continue;
    const float4 v = *reinterpret_cast<const float4*>(&red[r * SMALL_M_COLS + (c % SMALL_M_COLS)]);
    if (SMALL_M_SPLITS == 1) {
      if (N % 4 == 0) {
        C_VEC(r, c) = v;
      } else {
        C_AT(r, c) = v.x;
        if (c + 1 < N) C_AT(r, c + 1) = v.y;
        if (c + 2 < N) C_AT(r, c + 2) = v.z;
        if (c + 3 < N) C_AT(r, c + 3) = v.w;
      }
    } else {
      SMALL_PARTIAL_AT(split, r, c) = v.x;
      if (c + 1 < N) SMALL_PARTIAL_AT(split, r, c + 1) = v.y;
      if (c + 2 < N) SMALL_PARTIAL_AT(split, r, c + 2) = v.z;
      if (c + 3 < N) SMALL_PARTIAL_AT(split, r, c + 3) = v.w;
    }
  }
}

// C = the sum of the SMALL_M_SPLITS partial sums of the small-M path, added in split order; one
// thread per element of C.
__global__ void reduce_small_m(const float* small_partial, float* C, int M, int N) {
  const int i = (int)blockIdx.x * 256 + (int)threadIdx.x;
  if (i >= M * N) return;
  const int r = i / N;
  const int c = i % N;
  float sum = SMALL_PARTIAL_AT(0, r, c);
  for (int s = 1; s < SMALL_M_SPLITS; ++s) sum += SMALL_PARTIAL_AT(s, r, c);
  C_AT(r, c) = sum;
}
