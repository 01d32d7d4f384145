#pragma once
// kernel.toml text the tests of several modules build their contexts from.
#include <string>
#include <string_view>

namespace peak::testing {

// The arrays of a matmul as the CPU reference expects them: A (M * K) and B (K * N) of the given
// dtypes and the fp32 output C (M * N), with their default initializers.
inline std::string matmul_arrays_toml(std::string_view a_type = "f32",
                                      std::string_view b_type = "f32") {
  auto array = [](std::string_view name, std::string_view dtype, std::string_view size) {
    return "[[arrays]]\nname = \"" + std::string(name) + "\"\ndtype = \"" + std::string(dtype) +
           "\"\nsize = \"" + std::string(size) + "\"\n";
  };
  return array("A", a_type, "M * K") + array("B", b_type, "K * N") + array("C", "f32", "M * N") +
         "output = true\n";
}

// The scalars of that matmul, M, N and K, with neither values nor ranges.
inline constexpr std::string_view kMatmulScalarsToml = R"([[scalars]]
name = "M"
[[scalars]]
name = "N"
[[scalars]]
name = "K"
)";

// A memory-bound kernel.toml with `bytes` and no `flops` (no family: the generic family headlines
// it with GB/s): Y = X over N floats, N read and N written per launch.
inline constexpr std::string_view kCopyBytesToml = R"(name = "copy"
backend = "hlsl"
source = "k.hlsl"
bytes = "8 * N"
[[arrays]]
name = "X"
dtype = "f32"
size = "N"
[[arrays]]
name = "Y"
dtype = "f32"
size = "N"
output = true
[[scalars]]
name = "N"
[shapes]
bench = [{ N = 262144 }]
)";

}  // namespace peak::testing
