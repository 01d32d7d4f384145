#pragma once
// A vendor library loaded at run time (cuBLAS, cublasLt): dlopen'ed by the runner jobs that need
// it, so that the others start without mapping it and peak runs where it is absent.
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "util/result.h"

namespace peak::cuda {

class DlLibrary {
 public:
  // Opens `name` once (RTLD_NOW | RTLD_LOCAL) and resolves the entry points `bind` names through
  // get(pointer, "symbol"); an error (kept for later calls) says what could not be loaded.
  template <typename Bind>
  Status load(const std::string& name, Bind&& bind) {
    if (lib_) return Status::ok();
    if (!error_.empty()) return Status::error(error_);
    lib_ = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* why = ::dlerror();
      error_ = fmt::format("cannot load {}: {}", name, why ? why : "dlopen failed");
      return Status::error(error_);
    }
    std::string missing;
    bind([&](auto& f, const char* symbol) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(::dlsym(lib_, symbol));
      if (!f) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    });
    if (missing.empty()) return Status::ok();
    error_ = fmt::format("{} lacks {}", name, missing);
    ::dlclose(lib_);
    lib_ = nullptr;
    return Status::error(error_);
  }

 private:
  void* lib_ = nullptr;
  std::string error_;
};

}  // namespace peak::cuda
