#pragma once
// PTX of the 16-byte vector copy of peak-runner-cuda's same-traffic copy (Device::copy, method
// "vector-kernel"), loaded through the driver API like the FMA microbenchmark (fma_bench_ptx.h).
//
//   peak_copy16(void* dst, const void* src, unsigned long long bytes): a grid-stride loop copies
//   the bytes / 16 vectors of 16 bytes (ld.global.nc.v4 / st.global.v4: both pointers 16-byte
//   aligned), then the first bytes % 16 threads of the grid copy one byte each of the tail.
#include <string>

namespace peak::cuda {

inline constexpr const char* kCopyKernelName = "peak_copy16";
inline constexpr int kCopyThreads = 256;  // threads per block of peak_copy16

inline std::string copy_kernel_ptx() {
  return R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry peak_copy16(
  .param .u64 p_dst,
  .param .u64 p_src,
  .param .u64 p_bytes)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd0, [p_dst];
  ld.param.u64 %rd1, [p_src];
  ld.param.u64 %rd2, [p_bytes];
  cvta.to.global.u64 %rd0, %rd0;
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r0, %tid.x;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %nctaid.x;
  cvt.u64.u32 %rd3, %r0;
  mad.wide.u32 %rd3, %r1, %r2, %rd3;
  mul.wide.u32 %rd4, %r2, %r3;
  shr.u64 %rd5, %rd2, 4;
  mov.u64 %rd6, %rd3;
  setp.ge.u64 %p0, %rd6, %rd5;
  @%p0 bra TAIL;
LOOP:
  shl.b64 %rd7, %rd6, 4;
  add.s64 %rd8, %rd1, %rd7;
  ld.global.nc.v4.u32 {%r4, %r5, %r6, %r7}, [%rd8];
  add.s64 %rd9, %rd0, %rd7;
  st.global.v4.u32 [%rd9], {%r4, %r5, %r6, %r7};
  add.s64 %rd6, %rd6, %rd4;
  setp.lt.u64 %p1, %rd6, %rd5;
  @%p1 bra LOOP;
TAIL:
  and.b64 %rd10, %rd2, 15;
  setp.ge.u64 %p2, %rd3, %rd10;
  @%p2 bra DONE;
  shl.b64 %rd11, %rd5, 4;
  add.s64 %rd11, %rd11, %rd3;
  add.s64 %rd12, %rd1, %rd11;
  ld.global.nc.u8 %r8, [%rd12];
  add.s64 %rd13, %rd0, %rd11;
  st.global.u8 [%rd13], %r8;
DONE:
  ret;
}
)";
}

}  // namespace peak::cuda
