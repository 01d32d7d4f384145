// CUDA architecture names ("sm_90a"): one parser for the backend, the transformations' `requires`
// and the tests.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>

namespace peak {

struct CudaArch {
  int number = 0;   // 10 * major + minor: sm_90a -> 90
  char suffix = 0;  // 'a' (architecture-specific features), 0 = none
};

// "sm_90a" -> {90, 'a'}, "sm_80" -> {80, 0}; nullopt for anything else.
inline std::optional<CudaArch> parse_cuda_arch(std::string_view arch) {
  static const std::regex re("sm_([0-9]{2,3})([a-z]?)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(arch.begin(), arch.end(), m, re)) return std::nullopt;
  CudaArch a;
  a.number = std::stoi(m[1].str());
  a.suffix = m[2].length() ? m[2].str()[0] : 0;
  return a;
}

// 90 for "sm_90a"; 0 when the name is not a CUDA architecture (an unknown device).
inline int cuda_arch_number(std::string_view arch) {
  auto a = parse_cuda_arch(arch);
  return a ? a->number : 0;
}

}  // namespace peak
