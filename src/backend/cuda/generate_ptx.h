#pragma once
// PTX of peak-runner-cuda's input generator (Device::generate): the fresh inputs of a timed launch
// made on the device, the same bytes as generate_array on the host (context/inputs.h:
// InputGenerator says how; the GPU tests compare them). Loaded through the driver API like the
// vector copy (copy_kernel_ptx.h).
//
//   peak_generate(void* out, u64 count, u64 stream, u64 period, unsigned* nonzero, u32 kind,
//                 u32 dtype, f64 a, f64 d): a grid-stride loop writes element i of `count`;
//   kind 0 a + d*u(i), 1 a + floor(u(i)*d), 2 a, 3 i mod period, where u(i) is splitmix64's
//   output i of `stream` (context/prng.h) shifted right by 11 and scaled by 2^-53; dtype 0 f32,
//   1 f16, 2 bf16, 3 i32, 4 e4m3 (the fp8 module alone). Every add and multiply is rounded on its
//   own (add.rn / mul.rn: never fused), the double goes to float rounded to nearest even and on to
//   half (cvt.rn), bfloat16 (the host's integer rounding) or e4m3 (cvt.rn.satfinite, as
//   float_to_e4m3 on the host); i32 is rounded to nearest even and saturated (cvt.rni). A thread
//   that wrote a nonzero element (sign bit aside) sets *nonzero to 1: the host's zero fix needs
//   to know.
#include <cstdint>
#include <string>

namespace peak::cuda {

inline constexpr const char* kGenerateName = "peak_generate";
inline constexpr int kGenerateThreads = 256;  // threads per block of peak_generate

// `fp8`: the module that also writes e4m3 (PTX 8.1 for sm_89 and newer, whose cvt converts to
// fp8); the other runs on every GPU peak supports.
inline std::string generate_ptx(bool fp8 = false) {
  const std::string head = fp8 ? ".version 8.1\n.target sm_89\n" : ".version 7.0\n.target sm_70\n";
  const std::string to_e4m3 = fp8 ? R"(  setp.eq.u32 %p2, %r1, 4;
  @%p2 bra ST_E4M3;
)"
                                  : "";
  const std::string st_e4m3 = fp8 ? R"(ST_E4M3:
  mov.f32 %f1, 0f00000000;
  cvt.rn.satfinite.e4m3x2.f32 %h0, %f1, %f0;
  and.b16 %h1, %h0, 255;
  cvt.u32.u16 %r6, %h1;
  and.b32 %r8, %r6, 127;
  add.u64 %rd10, %rd0, %rd4;
  st.global.b8 [%rd10], %h1;
  bra.uni NEXT;
)"
                                  : "";
  return head + R"(.address_size 64

.visible .entry peak_generate(
  .param .u64 p_out,
  .param .u64 p_count,
  .param .u64 p_stream,
  .param .u64 p_period,
  .param .u64 p_nonzero,
  .param .u32 p_kind,
  .param .u32 p_dtype,
  .param .f64 p_a,
  .param .f64 p_d)
{
  .reg .pred %p<4>;
  .reg .b16 %h<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<2>;
  .reg .f64 %fd<6>;
  ld.param.u64 %rd0, [p_out];
  cvta.to.global.u64 %rd0, %rd0;
  ld.param.u64 %rd1, [p_count];
  ld.param.u64 %rd2, [p_stream];
  ld.param.u64 %rd3, [p_period];
  ld.param.u64 %rd11, [p_nonzero];
  cvta.to.global.u64 %rd11, %rd11;
  ld.param.u32 %r0, [p_kind];
  ld.param.u32 %r1, [p_dtype];
  ld.param.f64 %fd0, [p_a];
  ld.param.f64 %fd1, [p_d];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mov.u32 %r5, %nctaid.x;
  mul.wide.u32 %rd4, %r2, %r3;
  cvt.u64.u32 %rd5, %r4;
  add.u64 %rd4, %rd4, %rd5;
  mul.wide.u32 %rd6, %r5, %r3;
  mov.u32 %r9, 0;
LOOP:
  setp.ge.u64 %p0, %rd4, %rd1;
  @%p0 bra DONE;
  setp.eq.u32 %p1, %r0, 2;
  @%p1 bra CONSTANT;
  setp.eq.u32 %p1, %r0, 3;
  @%p1 bra IOTA;
  add.u64 %rd7, %rd4, 1;
  mul.lo.u64 %rd7, %rd7, 0x9E3779B97F4A7C15;
  add.u64 %rd7, %rd7, %rd2;
  shr.u64 %rd8, %rd7, 30;
  xor.b64 %rd7, %rd7, %rd8;
  mul.lo.u64 %rd7, %rd7, 0xBF58476D1CE4E5B9;
  shr.u64 %rd8, %rd7, 27;
  xor.b64 %rd7, %rd7, %rd8;
  mul.lo.u64 %rd7, %rd7, 0x94D049BB133111EB;
  shr.u64 %rd8, %rd7, 31;
  xor.b64 %rd7, %rd7, %rd8;
  shr.u64 %rd7, %rd7, 11;
  cvt.rn.f64.u64 %fd3, %rd7;
  mul.rn.f64 %fd3, %fd3, 0d3CA0000000000000;
  mul.rn.f64 %fd4, %fd1, %fd3;
  setp.eq.u32 %p1, %r0, 1;
  @%p1 bra UNIFORM_INT;
  add.rn.f64 %fd2, %fd0, %fd4;
  bra.uni STORE;
UNIFORM_INT:
  cvt.rmi.f64.f64 %fd4, %fd4;
  add.rn.f64 %fd2, %fd0, %fd4;
  bra.uni STORE;
CONSTANT:
  mov.f64 %fd2, %fd0;
  bra.uni STORE;
IOTA:
  rem.u64 %rd9, %rd4, %rd3;
  cvt.rn.f64.u64 %fd2, %rd9;
STORE:
  setp.eq.u32 %p2, %r1, 3;
  @%p2 bra ST_I32;
  cvt.rn.f32.f64 %f0, %fd2;
  mov.b32 %r6, %f0;
)" + to_e4m3 +
         R"(  setp.eq.u32 %p2, %r1, 0;
  @%p2 bra ST_F32;
  setp.eq.u32 %p2, %r1, 1;
  @%p2 bra ST_F16;
  shr.u32 %r7, %r6, 16;
  and.b32 %r7, %r7, 1;
  add.u32 %r7, %r7, 32767;
  add.u32 %r6, %r6, %r7;
  shr.u32 %r6, %r6, 16;
  cvt.u16.u32 %h0, %r6;
  bra.uni ST_16;
ST_F16:
  cvt.rn.f16.f32 %h0, %f0;
  cvt.u32.u16 %r6, %h0;
ST_16:
  and.b32 %r8, %r6, 32767;
  shl.b64 %rd10, %rd4, 1;
  add.u64 %rd10, %rd0, %rd10;
  st.global.b16 [%rd10], %h0;
  bra.uni NEXT;
ST_F32:
  and.b32 %r8, %r6, 2147483647;
  shl.b64 %rd10, %rd4, 2;
  add.u64 %rd10, %rd0, %rd10;
  st.global.b32 [%rd10], %r6;
  bra.uni NEXT;
)" + st_e4m3 +
         R"(ST_I32:
  cvt.rni.s32.f64 %r8, %fd2;
  shl.b64 %rd10, %rd4, 2;
  add.u64 %rd10, %rd0, %rd10;
  st.global.b32 [%rd10], %r8;
NEXT:
  setp.ne.u32 %p3, %r8, 0;
  @%p3 mov.u32 %r9, 1;
  add.u64 %rd4, %rd4, %rd6;
  bra.uni LOOP;
DONE:
  setp.eq.u32 %p3, %r9, 0;
  @%p3 bra END;
  st.global.u32 [%rd11], %r9;
END:
  ret;
}
)";
}

}  // namespace peak::cuda
