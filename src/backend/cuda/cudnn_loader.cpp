// cuDNN loaded at run time: dlopen, dlsym of the functions cudnn_loader.h declares, the version
// check. docs/backend-cuda.md ("The cuDNN baseline") describes what the runner does with it.
#include "backend/cuda/cudnn_loader.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace peak {

std::string cudnn_version_text(size_t v) {
  const size_t major = v >= 90000 ? 10000 : 1000;  // the weight of the major version
  return fmt::format("{}.{}.{}", v / major, (v % major) / 100, v % 100);
}

std::string CudnnApi::status_text(StatusCode s) const {
  std::string name = GetErrorString ? GetErrorString(s) : "";
  if (name.empty()) name = fmt::format("cuDNN status {}", s);
  if (GetLastErrorString == nullptr) return name;
  char last[1024] = {0};
  GetLastErrorString(last, sizeof last);
  return last[0] ? fmt::format("{} ({})", name, last) : name;
}

namespace {

// Resolves every function of `api` in `lib`; the names that are missing, comma-separated.
std::string resolve(void* lib, CudnnApi& api) {
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  get(api.GetVersion, "cudnnGetVersion");
  get(api.GetErrorString, "cudnnGetErrorString");
  get(api.GetLastErrorString, "cudnnGetLastErrorString");
  get(api.Create, "cudnnCreate");
  get(api.Destroy, "cudnnDestroy");
  get(api.SetStream, "cudnnSetStream");
  get(api.CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
  get(api.SetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
  get(api.DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
  get(api.SoftmaxForward, "cudnnSoftmaxForward");
  get(api.BackendCreateDescriptor, "cudnnBackendCreateDescriptor");
  get(api.BackendDestroyDescriptor, "cudnnBackendDestroyDescriptor");
  get(api.BackendFinalize, "cudnnBackendFinalize");
  get(api.BackendSetAttribute, "cudnnBackendSetAttribute");
  get(api.BackendGetAttribute, "cudnnBackendGetAttribute");
  get(api.BackendExecute, "cudnnBackendExecute");
  return missing;
}

}  // namespace

CudnnApi load_cudnn(const std::string& library) {
  CudnnApi api;
  api.library = library;
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    api.error = fmt::format("{} cannot be loaded ({})", library, why ? why : "dlopen failed");
    return api;
  }
  // An unusable library is closed again, and none of its functions is kept.
  auto refused = [&](std::string why) {
    ::dlclose(lib);
    CudnnApi none;
    none.library = library;
    none.error = std::move(why);
    return none;
  };
  std::string missing = resolve(lib, api);
  if (!missing.empty()) return refused(fmt::format("{} lacks {}", library, missing));
  size_t v = api.GetVersion();
  api.version = cudnn_version_text(v);
  if (v < 90000 || v >= 100000)
    return refused(fmt::format("{} is cuDNN {}; peak uses cuDNN 9", library, api.version));
  // A usable library stays loaded for the life of the process, like the driver library.
  return api;
}

const CudnnApi& process_cudnn() {
  static const CudnnApi api = load_cudnn();
  return api;
}

}  // namespace peak
