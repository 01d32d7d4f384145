#pragma once
// cuDNN loaded at run time (dlopen of libcudnn.so.9), so that peak builds and runs where cuDNN is
// absent: the CUDA runner then reports `cudnn` = "none: <why>" in its device facts and times no
// cuDNN baseline. No cuDNN header is included: the few functions used are declared here with
// types of our own, and the enumerations' values they take are mirrored below from cuDNN 9's
// cudnn_graph.h and cudnn_ops.h (values that cuDNN keeps stable within a major version).
// libcudnn.so.9 is cuDNN's dispatching shim: it exports the graph (backend) API and the legacy
// operations of libcudnn_ops.so.9 alike, and loads the sub-libraries it needs itself.
#include <cstddef>
#include <cstdint>
#include <string>

namespace peak {

namespace cudnn {
// Opaque pointers (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnBackendDescriptor_t, cudaStream_t).
using Handle = void*;
using TensorDescriptor = void*;
using BackendDescriptor = void*;
using Stream = void*;
using StatusCode = int;  // cudnnStatus_t

// cudnnStatus_t (cudnn_graph.h): success, and the categories of failure (code / 1000 * 1000).
inline constexpr StatusCode kSuccess = 0;
inline constexpr StatusCode kBadParamCategory = 2000;
inline constexpr StatusCode kNotSupportedCategory = 3000;
// cudnnDataType_t (cudnn_graph.h).
inline constexpr int kDataFloat = 0;
inline constexpr int kDataHalf = 2;
inline constexpr int kDataInt32 = 4;
inline constexpr int kDataBfloat16 = 9;
inline constexpr int kDataBoolean = 11;
// cudnnTensorFormat_t (cudnn_graph.h), cudnnSoftmaxAlgorithm_t and cudnnSoftmaxMode_t
// (cudnn_ops.h).
inline constexpr int kTensorNchw = 0;
inline constexpr int kSoftmaxAccurate = 1;
inline constexpr int kSoftmaxModeInstance = 0;
// cudnnBackendDescriptorType_t (cudnn_graph.h).
inline constexpr int kEngineCfgDescriptor = 3;
inline constexpr int kEngineHeurDescriptor = 4;
inline constexpr int kExecutionPlanDescriptor = 5;
inline constexpr int kOperationGraphDescriptor = 15;
inline constexpr int kVariantPackDescriptor = 16;
inline constexpr int kTensorDescriptor = 17;
inline constexpr int kNormForwardDescriptor = 29;
inline constexpr int kPointwiseDescriptor = 0;
inline constexpr int kOperationPointwiseDescriptor = 13;
inline constexpr int kMatmulDescriptor = 18;
inline constexpr int kOperationMatmulDescriptor = 19;
inline constexpr int kReductionDescriptor = 21;
inline constexpr int kOperationReductionDescriptor = 22;
// cudnnBackendAttributeType_t (cudnn_graph.h).
inline constexpr int kTypeHandle = 0;
inline constexpr int kTypeDataType = 1;
inline constexpr int kTypeBoolean = 2;
inline constexpr int kTypeInt64 = 3;
inline constexpr int kTypeVoidPtr = 6;
inline constexpr int kTypeHeurMode = 8;
inline constexpr int kTypePointwiseMode = 14;
inline constexpr int kTypeBackendDescriptor = 15;
inline constexpr int kTypeReductionOperator = 18;
inline constexpr int kTypeNormMode = 27;
inline constexpr int kTypeNormFwdPhase = 28;
// cudnnBackendAttributeName_t (cudnn_graph.h).
inline constexpr int kAttrEngineHeurMode = 200;
inline constexpr int kAttrEngineHeurOperationGraph = 201;
inline constexpr int kAttrEngineHeurResults = 202;
inline constexpr int kAttrExecutionPlanHandle = 400;
inline constexpr int kAttrExecutionPlanEngineConfig = 401;
inline constexpr int kAttrExecutionPlanWorkspaceSize = 402;
inline constexpr int kAttrOperationGraphHandle = 800;
inline constexpr int kAttrOperationGraphOps = 801;
inline constexpr int kAttrTensorByteAlignment = 900;
inline constexpr int kAttrTensorDataType = 901;
inline constexpr int kAttrTensorDimensions = 902;
inline constexpr int kAttrTensorStrides = 903;
inline constexpr int kAttrTensorUniqueId = 906;
inline constexpr int kAttrTensorIsVirtual = 907;
inline constexpr int kAttrTensorIsByValue = 908;
inline constexpr int kAttrVariantPackUniqueIds = 1000;
inline constexpr int kAttrVariantPackDataPointers = 1001;
inline constexpr int kAttrVariantPackWorkspace = 1003;
inline constexpr int kAttrPointwiseMode = 0;
inline constexpr int kAttrPointwiseMathPrecision = 1;
inline constexpr int kAttrPointwiseAxis = 9;
inline constexpr int kAttrOperationPointwiseDesc = 750;
inline constexpr int kAttrOperationPointwiseX = 751;
inline constexpr int kAttrOperationPointwiseB = 752;
inline constexpr int kAttrOperationPointwiseY = 753;
inline constexpr int kAttrOperationPointwiseT = 758;
inline constexpr int kAttrMatmulComputeType = 1500;
inline constexpr int kAttrOperationMatmulA = 1520;
inline constexpr int kAttrOperationMatmulB = 1521;
inline constexpr int kAttrOperationMatmulC = 1522;
inline constexpr int kAttrOperationMatmulDesc = 1523;
inline constexpr int kAttrReductionOperator = 1600;
inline constexpr int kAttrReductionComputeType = 1601;
inline constexpr int kAttrOperationReductionX = 1610;
inline constexpr int kAttrOperationReductionY = 1611;
inline constexpr int kAttrOperationReductionDesc = 1612;
inline constexpr int kAttrNormFwdMode = 2000;
inline constexpr int kAttrNormFwdPhase = 2001;
inline constexpr int kAttrNormFwdXDesc = 2002;
inline constexpr int kAttrNormFwdScaleDesc = 2005;
inline constexpr int kAttrNormFwdBiasDesc = 2006;
inline constexpr int kAttrNormFwdEpsilonDesc = 2007;
inline constexpr int kAttrNormFwdYDesc = 2013;
// cudnnBackendHeurMode_t, cudnnBackendNormMode_t, cudnnBackendNormFwdPhase_t (cudnn_graph.h).
inline constexpr int kHeurModeFallback = 2;
inline constexpr int kHeurModeA = 3;
inline constexpr int kLayerNorm = 0;
inline constexpr int kRmsNorm = 4;
inline constexpr int kNormFwdInference = 0;
// cudnnPointwiseMode_t and cudnnReduceTensorOp_t (cudnn_graph.h).
inline constexpr int kPointwiseAdd = 0;
inline constexpr int kPointwiseMul = 1;
inline constexpr int kPointwiseDiv = 6;
inline constexpr int kPointwiseSub = 9;
inline constexpr int kPointwiseExp = 13;
inline constexpr int kPointwiseLog = 15;
inline constexpr int kPointwiseCmpGe = 303;
inline constexpr int kPointwiseGenIndex = 501;
inline constexpr int kPointwiseBinarySelect = 601;
inline constexpr int kReduceAdd = 0;
inline constexpr int kReduceMax = 3;
}  // namespace cudnn

// The functions of cuDNN the runner calls, and what loading it gave. Enumerations pass as int
// (their C ABI on x86-64 and aarch64).
struct CudnnApi {
  using StatusCode = cudnn::StatusCode;
  size_t (*GetVersion)() = nullptr;
  const char* (*GetErrorString)(StatusCode) = nullptr;
  void (*GetLastErrorString)(char*, size_t) = nullptr;
  StatusCode (*Create)(cudnn::Handle*) = nullptr;
  StatusCode (*Destroy)(cudnn::Handle) = nullptr;
  StatusCode (*SetStream)(cudnn::Handle, cudnn::Stream) = nullptr;
  // The legacy softmax (libcudnn_ops.so.9 behind the shim).
  StatusCode (*CreateTensorDescriptor)(cudnn::TensorDescriptor*) = nullptr;
  StatusCode (*SetTensor4dDescriptor)(cudnn::TensorDescriptor, int format, int dtype, int n, int c,
                                      int h, int w) = nullptr;
  StatusCode (*DestroyTensorDescriptor)(cudnn::TensorDescriptor) = nullptr;
  StatusCode (*SoftmaxForward)(cudnn::Handle, int algo, int mode, const void* alpha,
                               cudnn::TensorDescriptor x_desc, const void* x, const void* beta,
                               cudnn::TensorDescriptor y_desc, void* y) = nullptr;
  // The graph (backend) API.
  StatusCode (*BackendCreateDescriptor)(int type, cudnn::BackendDescriptor*) = nullptr;
  StatusCode (*BackendDestroyDescriptor)(cudnn::BackendDescriptor) = nullptr;
  StatusCode (*BackendFinalize)(cudnn::BackendDescriptor) = nullptr;
  StatusCode (*BackendSetAttribute)(cudnn::BackendDescriptor, int name, int type, int64_t count,
                                    const void* elements) = nullptr;
  StatusCode (*BackendGetAttribute)(cudnn::BackendDescriptor, int name, int type, int64_t requested,
                                    int64_t* count, void* elements) = nullptr;
  StatusCode (*BackendExecute)(cudnn::Handle, cudnn::BackendDescriptor plan,
                               cudnn::BackendDescriptor variant_pack) = nullptr;

  std::string library;  // the name it was loaded by
  std::string version;  // "9.14.0" once loaded
  std::string error;    // why it is not usable ("" once loaded)

  bool ready() const { return error.empty() && GetVersion != nullptr; }
  // What the device facts say: the version, or "none: <why>".
  std::string describe() const { return ready() ? version : "none: " + error; }
  // "CUDNN_STATUS_NOT_SUPPORTED_SHAPE: <cuDNN's last error message>" for a failed call.
  std::string status_text(StatusCode s) const;
};

// Loads cuDNN by `library` (a soname dlopen searches for, or a path) and checks that it is
// cuDNN 9. Never throws: a library that is absent, lacks a function or is another major version
// gives an API whose `error` says so (and the library is closed again).
CudnnApi load_cudnn(const std::string& library = "libcudnn.so.9");
// The process's cuDNN: libcudnn.so.9, loaded on first use and kept for the process's life.
const CudnnApi& process_cudnn();
// "9.14.0" from cudnnGetVersion's number (cuDNN 9: major * 10000 + minor * 100 + patch; earlier
// majors: major * 1000 + minor * 100 + patch).
std::string cudnn_version_text(size_t version);

}  // namespace peak
