#pragma once
// PTX of the FP32 FMA-throughput microbenchmark run by peak-runner-cuda (Device::
// measure_fp32_tflops). Kept as PTX text and loaded through the driver API so that the runner
// stays a plain C++ executable; the driver compiles it for the device at load time.
//
//   peak_fma_bench(float* out, int iters, float a, float b): every thread runs 8 independent
//   chains x <- fma(x, a, b), kFmaPerIteration FMAs per loop iteration, `iters` iterations,
//   and stores the sum of its chains (so nothing is optimized away).
#include <string>

namespace peak::cuda {

inline constexpr int kFmaChains = 8;
inline constexpr int kFmaUnroll = 16;
inline constexpr int kFmaPerIteration = kFmaChains * kFmaUnroll;  // per thread
inline constexpr const char* kFmaBenchName = "peak_fma_bench";

inline std::string fma_bench_ptx() {
  std::string p;
  p += ".version 7.0\n.target sm_70\n.address_size 64\n\n";
  p += ".visible .entry peak_fma_bench(\n";
  p += "  .param .u64 p_out,\n  .param .u32 p_iters,\n  .param .f32 p_a,\n  .param .f32 p_b)\n{\n";
  p += "  .reg .pred %p<2>;\n  .reg .f32 %x<8>;\n  .reg .f32 %f<4>;\n";
  p += "  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;\n";
  p += "  ld.param.u64 %rd0, [p_out];\n";
  p += "  ld.param.u32 %r0, [p_iters];\n";
  p += "  ld.param.f32 %f0, [p_a];\n";
  p += "  ld.param.f32 %f1, [p_b];\n";
  p += "  mov.u32 %r1, %tid.x;\n";
  p += "  cvt.rn.f32.u32 %f2, %r1;\n";
  p += "  mul.f32 %x0, %f2, 0f3A83126F;\n";  // tid * 1e-3
  const char* offsets[] = {"0f3DCCCCCD", "0f3E4CCCCD", "0f3E99999A", "0f3ECCCCCD",
                           "0f3F000000", "0f3F19999A", "0f3F333333"};  // 0.1 .. 0.7
  for (int c = 1; c < kFmaChains; ++c)
    p += "  add.f32 %x" + std::to_string(c) + ", %x0, " + offsets[c - 1] + ";\n";
  p += "  mov.u32 %r2, 0;\n";
  p += "  setp.lt.s32 %p0, %r0, 1;\n";
  p += "  @%p0 bra DONE;\n";
  p += "LOOP:\n";
  for (int u = 0; u < kFmaUnroll; ++u)
    for (int c = 0; c < kFmaChains; ++c) {
      std::string x = "%x" + std::to_string(c);
      p += "  fma.rn.f32 " + x + ", " + x + ", %f0, %f1;\n";
    }
  p += "  add.s32 %r2, %r2, 1;\n";
  p += "  setp.lt.s32 %p1, %r2, %r0;\n";
  p += "  @%p1 bra LOOP;\n";
  p += "DONE:\n";
  p += "  add.f32 %f3, %x0, %x1;\n";
  for (int c = 2; c < kFmaChains; ++c) p += "  add.f32 %f3, %f3, %x" + std::to_string(c) + ";\n";
  p += "  mov.u32 %r3, %ctaid.x;\n";
  p += "  mov.u32 %r4, %ntid.x;\n";
  p += "  mad.lo.s32 %r5, %r3, %r4, %r1;\n";
  p += "  cvta.to.global.u64 %rd1, %rd0;\n";
  p += "  mul.wide.u32 %rd2, %r5, 4;\n";
  p += "  add.s64 %rd3, %rd1, %rd2;\n";
  p += "  st.global.f32 [%rd3], %f3;\n";
  p += "  ret;\n}\n";
  return p;
}

inline constexpr const char* kGateName = "peak_gate";

// The gate that keeps host overhead out of timed samples (as nvbench's blocking kernel does):
//   peak_gate(unsigned* flag, unsigned long long limit_ns) spins until flag[0] != 0, so the runner
// can enqueue the start event, every step of the plan and the end event while the device waits,
// then release it. After limit_ns of waiting (the host never released it) it gives up and sets
// flag[1] = 1, so the sample is known to include host time.
inline std::string gate_ptx() {
  std::string p;
  p += ".version 7.0\n.target sm_70\n.address_size 64\n\n";
  p += ".visible .entry peak_gate(\n  .param .u64 p_flag,\n  .param .u64 p_limit)\n{\n";
  p += "  .reg .pred %p<2>;\n  .reg .b32 %r<2>;\n  .reg .b64 %rd<6>;\n";
  p += "  ld.param.u64 %rd0, [p_flag];\n";
  p += "  cvta.to.global.u64 %rd0, %rd0;\n";
  p += "  ld.param.u64 %rd1, [p_limit];\n";
  p += "  mov.u64 %rd2, %globaltimer;\n";
  p += "LOOP:\n";
  p += "  ld.volatile.global.u32 %r0, [%rd0];\n";
  p += "  setp.ne.u32 %p0, %r0, 0;\n";
  p += "  @%p0 bra DONE;\n";
  p += "  mov.u64 %rd3, %globaltimer;\n";
  p += "  sub.u64 %rd4, %rd3, %rd2;\n";
  p += "  setp.gt.u64 %p1, %rd4, %rd1;\n";
  p += "  @!%p1 bra LOOP;\n";
  p += "  mov.u32 %r1, 1;\n";
  p += "  st.volatile.global.u32 [%rd0+4], %r1;\n";
  p += "DONE:\n";
  p += "  ret;\n}\n";
  return p;
}

}  // namespace peak::cuda
