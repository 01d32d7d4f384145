#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace peak {
// SHA-256 of a byte string, as 64 lowercase hex digits. Used for content addresses and prompt keys.
std::string sha256_hex(std::string_view data);
}  // namespace peak
