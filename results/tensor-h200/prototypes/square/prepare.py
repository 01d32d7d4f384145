#!/usr/bin/env python3
"""Exports checkpoint CKPT of workspace WS once per variant (peak export --name VARIANT), patches
each export's host plan or device code as the variant says, and writes variants.h for bench.cu.
  prepare.py PEAK WS CKPT OUTDIR
The variants (configuration 2 of the export: the square and wide classes, WG_M=2 WG_N=256):
  whole    the checkpoint as tuned (DP_TAIL_IDLE=8: 4096^3 runs whole tiles)
  sk       DP_TAIL_IDLE=0: the last partial wave runs Stream-K
  skonce   sk without the plan's memset of the flags (the owners leave them at 0; the workspace
           is zeroed once)
  sknofix  sk with no partial tile written or added (timing only: the flags alone)
  noepi    whole with no epilogue: nothing stored to C (timing only)
  sSeE     whole with S pipeline stages and E staging buffers of the TMA-store epilogue per
           consumer (the checkpoint: s4e2), e.g. s3e5
  gstore   whole with the direct stores of the epilogue (no TMA store) for every shape
  wstore   whole with the epilogue's TMA stores issued per warp (16 rows each, no warpgroup
           barrier: each warp waits for its own stores)
  notma    whole with the staging buffers written but no TMA store issued (timing only)
  pingpong tiles of 64 x 256, the block's units alternating between the two consumers (each
           a whole tile), so that one consumer's epilogue runs beside the other's main loop; a
           consumer starts a unit's waits once the other has waited for its unit's last K tile
           (bar.arrive / bar.sync); no Stream-K tail
  cluster2 whole tiles in clusters of two blocks that compute vertically adjacent tiles, each
           copying half of every B chunk's K rows with a multicast TMA copy into both blocks
           (transformations/matmul/cluster.md on this kernel; one split, whole tiles only)
  clownb   cluster2 with no multicast: each block copies its whole B tile itself (two boxes per
           chunk), the stages still released in both blocks (remote arrivals)
  cllocal  clownb with the stages released in the own block only: cluster2's launch and tile
           order alone
  clcta    cluster2 with the remote arrivals at the default semantics (release, CTA scope)
           instead of release at cluster scope
  clctaownb  clcta with no multicast (as clownb)
  clctag8  clcta with GROUP_M = 8 (cluster tiles of 256 rows: groups of 2048 rows, as whole's 16)
  clsk     clcta with the Stream-K tail kept: the plan counts cluster tiles and half as many
           multiprocessors (one per cluster), the tail's ranges are cut per cluster
  clskg8   clsk with GROUP_M = 8
  ppcl     pingpong in clusters of two (clcta): 64 x 256 tiles, B shared by multicast, so that a
           block copies 24 KB per K tile as whole copies 48 KB for twice the work
  ppclsSeE ppcl with S stages and E staging buffers per consumer, e.g. ppcls5e1
  ppsSeE   pingpong with S stages and E staging buffers per consumer, e.g. pps5e1
  pp128    pingpong with 128 x 128 units (WG_N = 128): one consumer computes a whole tile with
           two 64-row MMAs per K step, its epilogue a half at a time (32 KiB stages)
  pp128sSeE  pp128 with S stages and E staging buffers per consumer, e.g. pp128s6e2
  prepare.py PEAK WS CKPT OUTDIR [VARIANT ...]   (default: whole sk skonce sknofix noepi)
"""
import subprocess, sys, pathlib, re

peak, ws, ckpt, out = sys.argv[1], sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)

def sub(text, old, new, count=1):
    if text.count(old) < count:
        sys.exit(f"pattern not found {count} times: {old[:60]!r}")
    return text.replace(old, new)

def plan2(cpp, f):
    start = cpp.index("static int pk_plan_2(")
    end = cpp.index("static int pk_plan_3(")
    return cpp[:start] + f(cpp[start:end]) + cpp[end:]

def tail_idle0(cpp):
    return plan2(cpp, lambda s: sub(s, "((int64_t)8LL), d->compute_units", "((int64_t)0LL), d->compute_units"))

def no_memset(cpp):
    return sub(cpp, "if (t.op == PK_OP_MEMSET) {", "if (t.op == PK_OP_MEMSET) {\n      continue;")

def no_fix(cu):
    cu = sub(cu, "for (int q = 0; q < BLOCK_TILE_N / 8; ++q)\n            SK_PARTIAL_AT",
             "for (int q = 0; q < 0; ++q)\n            SK_PARTIAL_AT")
    return sub(cu, "for (int q = 0; q < BLOCK_TILE_N / 8; ++q) {\n              const float4 v",
               "for (int q = 0; q < 0; ++q) {\n              const float4 v")

def no_epilogue(cu):
    return sub(cu, "      if (splits == 1 && N % 4 == 0) {\n",
               "      if (splits == 1) continue;\n      if (splits == 1 && N % 4 == 0) {\n")

def stages_bufs(S, E, stage_bytes=49152):
    def cu(text):
        text = sub(text, "#define NUM_STAGES 4\n", f"#define NUM_STAGES {S}\n#define EPI_BUFS {E}\n")
        text = sub(text, "(WG_M) * 2 * (EPI_BUF_BYTES)", "(WG_M) * (EPI_BUFS) * (EPI_BUF_BYTES)")
        text = sub(text, "epi + WG_M * 2 * EPI_BUF_BYTES", "epi + WG_M * EPI_BUFS * EPI_BUF_BYTES")
        text = sub(text, "(cw * 2 + c % 2)", "(cw * EPI_BUFS + c % EPI_BUFS)")
        return sub(text, "tma_store_wait_read<1>();", "tma_store_wait_read<EPI_BUFS - 1>();")
    smem = S * stage_bytes + 2 * E * 8192 + 1024 + 16 * S
    def cpp(text):
        return plan2(text, lambda t: sub(t, "t_->shared = pk_x_use(&e_, em_SMEM_BYTES, m_SMEM_BYTES);",
                                         f"t_->shared = {smem};"))
    return cpp, cu

def direct_stores(cu):
    return sub(cu, "      if (splits == 1 && N % 4 == 0) {\n", "      if (false) {\n")

def no_tma_store(cu):
    return sub(cu, "tma_store_2d(&c_map, buf, col0 + c * C_BOX_COLS, row0 + 64 * cw);", "")

def warp_stores_cu(cu):
    cu = sub(cu, "          if (tid % 128 == 0) tma_store_wait_read<1>();  // the store that read buf before is done\n          warpgroup_barrier(1 + cw);\n",
             "          if (lane == 0) tma_store_wait_read<1>();\n          __syncwarp();\n")
    cu = sub(cu, """          tma_store_fence();
          warpgroup_barrier(1 + cw);
          if (tid % 128 == 0) {
            tma_store_2d(&c_map, buf, col0 + c * C_BOX_COLS, row0 + 64 * cw);""",
             """          tma_store_fence();
          __syncwarp();
          if (lane == 0) {
            tma_store_2d(&c_map, buf + warp * 2048, col0 + c * C_BOX_COLS, row0 + 64 * cw + 16 * warp);""")
    return sub(cu, "    if (tid % 128 == 0) tma_store_wait<0>();", "    if (lane == 0) tma_store_wait<0>();")

def warp_stores_cpp(cpp):
    return plan2(cpp, lambda t: sub(t, "m_->box[0] = pk_x_use(&e_, em_C_BOX_COLS, m_C_BOX_COLS);\n  m_->box[1] = ((int64_t)64LL);",
                                    "m_->box[0] = pk_x_use(&e_, em_C_BOX_COLS, m_C_BOX_COLS);\n  m_->box[1] = ((int64_t)16LL);"))

def ping_pong_schedule(cu):
    """The ping-pong schedule shared by pingpong and pp128: the block's units alternate between
    the consumers, one consumer's main loop at a time (named barriers hand it over), a stage
    released by the one consumer that used it."""
    cu = sub(cu, "// end of helper tma-store\n", """__device__ __forceinline__ void consumers_sync(int id) {
  asm volatile("bar.sync %0, 256;\\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void consumers_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\\n" ::"r"(id) : "memory");
}
// end of helper tma-store
""")
    if "WG_M * CLUSTER_M);" in cu:
        cu = sub(cu, "mbar_init(&empty[s], WG_M * CLUSTER_M);", "mbar_init(&empty[s], CLUSTER_M);")
    else:
        cu = sub(cu, "mbar_init(&empty[s], WG_M);", "mbar_init(&empty[s], 1);")
    cu = sub(cu, """    while (next_segment(w, M, N, K, splits, dp_tiles, tile, split, t0, t1)) {
      int row0, col0;
""", """    int u = -1;  // the block's units alternate between the consumers: unit u is consumer u % 2's
    while (next_segment(w, M, N, K, splits, dp_tiles, tile, split, t0, t1)) {
      if (++u % 2 != cw) {
        it += t1 - t0;
        continue;
      }
      Work wn = w;
      int tn, sn, un0, un1;
      const bool has_next = next_segment(wn, M, N, K, splits, dp_tiles, tn, sn, un0, un1);
      // The other consumer has waited for every K tile of the unit before: the stages' phases
      // this consumer waits for are the next ones.
      if (u > 0) consumers_sync(3 + u % 2);
      int row0, col0;
""")
    cu = sub(cu, "      // No batch pending: the accumulators are final; the last K tile's stage is released.\n",
             "      if (has_next) consumers_arrive(3 + (u + 1) % 2);\n"
             "      // No batch pending: the accumulators are final; the last K tile's stage is released.\n")
    return cu

def ping_pong_cu(cu):
    cu = sub(cu, "#define BLOCK_TILE_M (64 * (WG_M))\n", "#define BLOCK_TILE_M 64\n")
    cu = ping_pong_schedule(cu)
    cu = sub(cu, "smem + s * STAGE_BYTES + cw * 64 * 128;", "smem + s * STAGE_BYTES;")
    cu = sub(cu, "row0 + 64 * cw);", "row0);")
    return sub(cu, "const int row = row0 + cw * 64 + warp * 16 + lane / 4;",
               "const int row = row0 + warp * 16 + lane / 4;")

def ping_pong128_cu(cu):
    """pingpong with 128 x 128 units: each consumer computes a whole 128 x 128 tile, two 64-row
    MMAs per K step into two accumulator arrays (acc, acc1), its epilogue one half after the
    other. Stream-K and the direct-store path are not rewritten: they trap."""
    cu = ping_pong_schedule(sub(cu, "#define WG_N 256\n", "#define WG_N 128\n"))
    cu = sub(cu, """      float acc[BLOCK_TILE_N / 2];
#pragma unroll
      for (int i = 0; i < BLOCK_TILE_N / 2; ++i) acc[i] = 0.0f;
""", """      float acc[BLOCK_TILE_N / 2], acc1[BLOCK_TILE_N / 2];
#pragma unroll
      for (int i = 0; i < BLOCK_TILE_N / 2; ++i) acc[i] = acc1[i] = 0.0f;
""")
    cu = sub(cu, "smem + s * STAGE_BYTES + cw * 64 * 128;", "smem + s * STAGE_BYTES;")
    mma = """          wgmma_m64k16<BLOCK_TILE_N, __half>(acc, wgmma_desc(a_tile + kk * 32, 16, 1024),
                                             wgmma_desc(b_tile + kk * 2048, B_CHUNK_BYTES, 1024));
"""
    cu = sub(cu, "#pragma unroll\n        for (int kk = 0; kk < WG_TILE_K / 16; ++kk)\n" + mma,
             "#pragma unroll\n        for (int kk = 0; kk < WG_TILE_K / 16; ++kk) {\n" + mma
             + mma.replace("(acc,", "(acc1,").replace("a_tile + kk * 32", "a_tile + 64 * 128 + kk * 32")
             + "        }\n")
    both = lambda n: (f"wgmma_fence_operands(acc1);\n        wgmma_wait<{n}>(acc);\n"
                      "        wgmma_fence_operands(acc1);")
    cu = sub(cu, "wgmma_wait<1>(acc);", both(1))
    cu = sub(cu, "wgmma_wait<0>(acc);", both(0))
    cu = sub(cu, "      if (splits == 1 && tile >= dp_tiles) {\n",
             "      if (splits == 1 && tile >= dp_tiles) {\n        __trap();\n")
    start = cu.index("      if (splits == 1 && N % 4 == 0) {\n")
    end = cu.index("        continue;\n      }\n", start) + len("        continue;\n      }\n")
    epi = cu[start:end]
    body = epi[len("      if (splits == 1 && N % 4 == 0) {\n"):-len("        continue;\n      }\n")]
    half0 = sub(body, "row0 + 64 * cw);", "row0);")
    half1 = half0.replace("acc[", "acc1[").replace("row0);", "row0 + 64);")
    cu = cu[:start] + "      if (splits == 1 && N % 4 == 0) {\n" + half0 + half1 + \
        "        continue;\n      }\n" + cu[end:]
    return sub(cu, "      const int row = row0 + cw * 64 + warp * 16 + lane / 4;\n",
               "      __trap();\n      const int row = row0 + cw * 64 + warp * 16 + lane / 4;\n")

def ping_pong128_cpp(cpp):
    return no_stream_k(plan2(cpp, lambda t: sub(t, "m_BLOCK_TILE_N = ((int64_t)256LL);",
                                                "m_BLOCK_TILE_N = ((int64_t)128LL);")))

def no_stream_k(cpp):
    return plan2(cpp, lambda s: sub(s, "((int64_t)8LL), d->compute_units", "((int64_t)64LL), d->compute_units"))

def ping_pong_cpp(cpp):
    return no_stream_k(plan2(cpp, lambda t: sub(t, "pk_x_mul(&em_BLOCK_TILE_M, ((int64_t)64LL), ((int64_t)2LL))",
                                                "((int64_t)64LL)")))

def cluster_helper():
    """The cluster helper of transformations/matmul/cluster.md with its version 1 remote arrival
    (release at cluster scope), as calls 34 and 35 ran it: version 2 arrives at CTA scope, which
    is what cta_scope_release makes of version 1."""
    md = (pathlib.Path(__file__).resolve().parents[4] / "transformations/matmul/cluster.md").read_text()
    code = md.split("code = '''\n", 1)[1].split("'''", 1)[0]
    return code.replace(" mbarrier.arrive.shared::cluster.b64 _, [remote];",
                        " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];")

def cluster_cu(cu):
    cu = sub(cu, "#define TILES_M (((M) + (BLOCK_TILE_M) - 1) / (BLOCK_TILE_M))\n",
             "#define CLUSTER_M 2\n#define CLUSTER_TILE_M ((CLUSTER_M) * (BLOCK_TILE_M))\n"
             "#define B_SLICE_ROWS ((WG_TILE_K) / (CLUSTER_M))\n#define B_SLICE_BYTES ((B_SLICE_ROWS) * 64 * 2)\n"
             "#define TILES_M (((M) + (CLUSTER_TILE_M) - 1) / (CLUSTER_TILE_M))\n")
    cu = sub(cu, "// The block tile that the tile index", cluster_helper() + "// The block tile that the tile index")
    cu = sub(cu, "row0 = (first_m + in_group % rows) * BLOCK_TILE_M;", "row0 = (first_m + in_group % rows) * CLUSTER_TILE_M;")
    cu = sub(cu, "    w.u += gridDim.x;\n", "    w.u += gridDim.x / CLUSTER_M;\n")
    cu = sub(cu, "      mbar_init(&empty[s], WG_M);", "      mbar_init(&empty[s], WG_M * CLUSTER_M);")
    cu = sub(cu, "  __syncthreads();\n  if (wg == 0) {", "  cluster_sync();\n  const unsigned rank = cluster_ctarank();\n  dp_tiles = TILES_M * TILES_N;\n  if (wg == 0) {")
    cu = sub(cu, "Work w{static_cast<int>(blockIdx.x),", "Work w{static_cast<int>(blockIdx.x) / CLUSTER_M,", 2)
    cu = sub(cu, "tile_origin(tile, M, N, row0, col0);\n", "tile_origin(tile, M, N, row0, col0);\n        row0 += rank * BLOCK_TILE_M;\n", 2)
    cu = sub(cu, """            tma_load_2d(b_stage + c * B_CHUNK_BYTES, &b_map, &full[s], col0 + c * 64,
                        t * WG_TILE_K);""", """            tma_load_2d_multicast(b_stage + c * B_CHUNK_BYTES + rank * B_SLICE_BYTES, &b_map,
                                  &full[s], col0 + c * 64, t * WG_TILE_K + rank * B_SLICE_ROWS,
                                  (1u << CLUSTER_M) - 1);""")
    cu = sub(cu, "if (t > t0 && tid % 128 == 0) mbar_arrive(&empty[(it - 1) % NUM_STAGES]);",
             "if (t > t0 && tid % 128 == 0)\n          for (unsigned r = 0; r < CLUSTER_M; ++r) mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);")
    cu = sub(cu, "if (t1 > t0 && tid % 128 == 0) mbar_arrive(&empty[(it - 1) % NUM_STAGES]);",
             "if (t1 > t0 && tid % 128 == 0)\n        for (unsigned r = 0; r < CLUSTER_M; ++r) mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);")
    return sub(cu, "    if (tid % 128 == 0) tma_store_wait<0>();  // every store of this consumer has landed\n  }\n}\n",
               "    if (tid % 128 == 0) tma_store_wait<0>();  // every store of this consumer has landed\n  }\n  cluster_sync();\n}\n")

def cluster_own_b(cu):
    """cluster2 with every block copying its whole B tile (two boxes of B_SLICE_ROWS rows per
    chunk, into its own shared memory only); the stages are still released in both blocks."""
    return sub(cu, """            tma_load_2d_multicast(b_stage + c * B_CHUNK_BYTES + rank * B_SLICE_BYTES, &b_map,
                                  &full[s], col0 + c * 64, t * WG_TILE_K + rank * B_SLICE_ROWS,
                                  (1u << CLUSTER_M) - 1);""", """            for (unsigned r = 0; r < CLUSTER_M; ++r)
              tma_load_2d_multicast(b_stage + c * B_CHUNK_BYTES + r * B_SLICE_BYTES, &b_map,
                                    &full[s], col0 + c * 64, t * WG_TILE_K + r * B_SLICE_ROWS,
                                    1u << rank);""")

def cluster_local_release(cu):
    """cluster_own_b with each block releasing its stages in its own block only."""
    cu = sub(cu, "mbar_init(&empty[s], WG_M * CLUSTER_M);", "mbar_init(&empty[s], WG_M);")
    return sub(cu, "for (unsigned r = 0; r < CLUSTER_M; ++r) mbar_arrive_cluster(&empty[(it - 1) % NUM_STAGES], r);",
               "mbar_arrive(&empty[(it - 1) % NUM_STAGES]);", 2)

def cta_scope_release(cu):
    """The remote arrival of the cluster helper with the default semantics (release, CTA scope)
    instead of release at cluster scope."""
    return sub(cu, "mbarrier.arrive.release.cluster.shared::cluster.b64", "mbarrier.arrive.shared::cluster.b64")

def half_b_box(t):
    """B's tensor-map box of 64 columns by half the K tile's rows (each block of a cluster of
    two copies half of every chunk)."""
    return t.replace("m_->box[0] = ((int64_t)64LL);\n  m_->box[1] = pk_x_use(&e_, em_WG_TILE_K, m_WG_TILE_K);",
                     "m_->box[0] = ((int64_t)64LL);\n  m_->box[1] = ((int64_t)32LL);")

def cluster_of_two(t):
    """The main kernel's launch in clusters of two blocks."""
    i = t.index("  t_->kernel = 1;\n")
    j = t.index("t_->cluster[0] = t_->cluster[1] = t_->cluster[2] = 1;", i)
    k = j + len("t_->cluster[0] = t_->cluster[1] = t_->cluster[2] = 1;")
    return t[:k] + " t_->cluster[0] = 2;" + t[k:]

def cluster_cpp(cpp):
    def f(t):
        t = half_b_box(t)
        t = sub(t, "((int64_t)8LL), d->compute_units", "((int64_t)64LL), d->compute_units")
        return cluster_of_two(t)
    return plan2(cpp, f)

def cluster_sk_cu(cu):
    """cluster2 (CTA-scope releases) keeping the Stream-K tail: the tail's ranges are cut per
    cluster, both blocks of a cluster walk the same segments, slots are numbered per block."""
    cu = cta_scope_release(cluster_cu(cu))
    cu = sub(cu, "  dp_tiles = TILES_M * TILES_N;\n", "")
    cu = sub(cu, "(K_TILES) * (b) / (gridDim.x))", "(K_TILES) * (b) / (gridDim.x / CLUSTER_M))")
    cu = sub(cu, "SK_BEGIN(blockIdx.x), SK_BEGIN(blockIdx.x + 1)}",
             "SK_BEGIN(blockIdx.x / CLUSTER_M), SK_BEGIN(blockIdx.x / CLUSTER_M + 1)}", 2)
    cu = sub(cu, "for (int c = blockIdx.x + 1; c < static_cast<int>(gridDim.x) && SK_BEGIN(c) < tile_end;",
             "for (int c = blockIdx.x / CLUSTER_M + 1; c < static_cast<int>(gridDim.x / CLUSTER_M) && SK_BEGIN(c) < tile_end;")
    return sub(cu, "const int slot = c * WG_M + cw;", "const int slot = (c * CLUSTER_M + rank) * WG_M + cw;")

def cluster_sk_cpp(cpp):
    def f(t):
        t = half_b_box(t)
        t = sub(t, "int64_t p_tiles = pk_x_mul(&e_, pk_x_ceil_div(&e_, s->M, pk_x_use(&e_, em_BLOCK_TILE_M, m_BLOCK_TILE_M)),",
                "int64_t p_tiles = pk_x_mul(&e_, pk_x_ceil_div(&e_, s->M, 2 * m_BLOCK_TILE_M),")
        a = t.index("  int64_t p_splits =")
        b = t.index("\n", t.index("  int64_t p_dp_tiles ="))
        t = t[:a] + t[a:b].replace("d->compute_units", "(d->compute_units / 2)") + t[b:]
        t = sub(t, "t_->grid[0] = ((p_sk) != 0 ? (d->compute_units) : (pk_x_min(pk_x_mul(&e_, p_tiles, p_splits), d->compute_units)));",
                "t_->grid[0] = 2 * ((p_sk) != 0 ? (d->compute_units / 2) : (pk_x_min(pk_x_mul(&e_, p_tiles, p_splits), d->compute_units / 2)));")
        return cluster_of_two(t)
    return plan2(cpp, f)

def ping_pong_cluster_cpp(cpp):
    cpp = plan2(cpp, lambda t: sub(t, "pk_x_mul(&em_BLOCK_TILE_M, ((int64_t)64LL), ((int64_t)2LL))",
                                   "((int64_t)64LL)"))
    return cluster_cpp(cpp)

def group8(cu):
    return sub(cu, "#define GROUP_M 16\n", "#define GROUP_M 8\n")

variants = {
    "whole": ([], [], True),
    "sk": ([tail_idle0], [], True),
    "skonce": ([tail_idle0, no_memset], [], True),
    "sknofix": ([tail_idle0], [no_fix], False),
    "noepi": ([], [no_epilogue], False),
    "gstore": ([], [direct_stores], True),
    "notma": ([], [no_tma_store], False),
    "wstore": ([warp_stores_cpp], [warp_stores_cu], True),
    "wstoresk": ([warp_stores_cpp, tail_idle0], [warp_stores_cu], True),
    "pingpong": ([ping_pong_cpp], [ping_pong_cu], True),
    "pp128": ([ping_pong128_cpp], [ping_pong128_cu], True),
    "cluster2": ([cluster_cpp], [cluster_cu], True),
    "clownb": ([cluster_cpp], [cluster_cu, cluster_own_b], True),
    "clcta": ([cluster_cpp], [cluster_cu, cta_scope_release], True),
    "clctaownb": ([cluster_cpp], [cluster_cu, cta_scope_release, cluster_own_b], True),
    "clctag8": ([cluster_cpp], [cluster_cu, cta_scope_release, group8], True),
    "clsk": ([cluster_sk_cpp], [cluster_sk_cu], True),
    "clskg8": ([cluster_sk_cpp], [cluster_sk_cu, group8], True),
    "ppcl": ([ping_pong_cluster_cpp], [cluster_cu, cta_scope_release, ping_pong_cu], True),
    "cllocal": ([cluster_cpp], [cluster_cu, cluster_own_b, cluster_local_release], True),
}
for a in sys.argv[5:]:
    m = re.fullmatch(r"s(\d)e(\d)", a)
    if m:
        cpp, cu = stages_bufs(int(m[1]), int(m[2]))
        variants[a] = ([cpp], [cu], True)
    m = re.fullmatch(r"pp128s(\d)e(\d)", a)
    if m:
        cpp, cu = stages_bufs(int(m[1]), int(m[2]), 32768)
        variants[a] = ([ping_pong128_cpp, cpp], [ping_pong128_cu, cu], True)
    m = re.fullmatch(r"pps(\d)e(\d)", a)
    if m:
        cpp, cu = stages_bufs(int(m[1]), int(m[2]), 40960)
        variants[a] = ([ping_pong_cpp, cpp], [ping_pong_cu, cu], True)
    m = re.fullmatch(r"ppcls(\d)e(\d)", a)
    if m:
        cpp, cu = stages_bufs(int(m[1]), int(m[2]), 40960)
        variants[a] = ([ping_pong_cluster_cpp, cpp], [cluster_cu, cta_scope_release, ping_pong_cu, cu], True)
wanted = sys.argv[5:] or ["whole", "sk", "skonce", "sknofix", "noepi"]
variants = {k: variants[k] for k in wanted}
entries = []
for name, (host, device, checked) in variants.items():
    d = out / name
    subprocess.run([peak, "-C", ws, "-q", "export", ckpt, "--name", name, "-o", str(d), "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    cpp = d / f"peak_{name}.cpp"
    text = cpp.read_text()
    for f in host:
        text = f(text)
    cpp.write_text(text)
    cu = d / "kernels" / "config_2.cu"
    text = cu.read_text()
    for f in device:
        text = f(text)
    cu.write_text(text)
    entries.append(f'{{"{name}", peak_{name}, peak_{name}_workspace_size, {str(checked).lower()}}}')
hdr = "".join(f'#include "{n}/peak_{n}.h"\n' for n in variants)
hdr += "#define PROTO_VARIANTS {" + ", ".join(entries) + "}\n"
(out / "variants.h").write_text(hdr)
print(" ".join(variants))
