// The cuDNN baselines of the row families (cudnn_baseline.h): the legacy softmax, and the graph
// API's normalization forward built into an execution plan per shape. docs/backend-cuda.md ("The
// cuDNN baseline") describes them.
#include "backend/cuda/cudnn_baseline.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace peak {

namespace {

using cudnn::BackendDescriptor;
using cudnn::StatusCode;

constexpr int64_t kEpsilonUid = 100;  // the arrays take uids 1, 2, ... in the order below
constexpr int64_t kByteAlignment = 16;

// The arrays each family's baseline reads, then the one it writes.
const std::vector<std::string>* arrays_of(std::string_view family) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> arrays = {
      {"softmax", {"X", "Y"}},
      {"rmsnorm", {"X", "W", "Y"}},
      {"layernorm", {"X", "W", "B", "Y"}},
      {"attention", {"Q", "K", "V", "O"}}};
  auto it = arrays.find(family);
  return it == arrays.end() ? nullptr : &it->second;
}

// cuDNN's data type of `t`; -1 where cuDNN has none peak uses.
int cudnn_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return cudnn::kDataFloat;
    case DType::f16:
      return cudnn::kDataHalf;
    case DType::bf16:
      return cudnn::kDataBfloat16;
    default:
      return -1;
  }
}

// A refusal (a bad parameter, or something not supported) rather than a failure while running.
bool is_refusal(StatusCode s) {
  int category = s / 1000 * 1000;
  return category == cudnn::kBadParamCategory || category == cudnn::kNotSupportedCategory;
}

// A backend descriptor, destroyed with its owner.
class BackendDesc {
 public:
  BackendDesc(const CudnnApi& api, int type) : api_(&api) {
    status_ = api.BackendCreateDescriptor(type, &d_);
    if (status_ != cudnn::kSuccess) d_ = nullptr;
  }
  BackendDesc(BackendDesc&& o) noexcept
      : api_(o.api_), d_(std::exchange(o.d_, nullptr)), status_(o.status_) {}
  BackendDesc& operator=(BackendDesc&&) = delete;
  ~BackendDesc() {
    if (d_) api_->BackendDestroyDescriptor(d_);
  }
  BackendDescriptor get() const { return d_; }
  StatusCode status() const { return status_; }

 private:
  const CudnnApi* api_;
  BackendDescriptor d_ = nullptr;
  StatusCode status_ = cudnn::kSuccess;
};

// A legacy tensor descriptor (cudnnTensorDescriptor_t), destroyed with its owner.
struct LegacyTensor {
  const CudnnApi* api = nullptr;
  cudnn::TensorDescriptor d = nullptr;
  ~LegacyTensor() {
    if (d) api->DestroyTensorDescriptor(d);
  }
};

}  // namespace

struct CudnnBaselines::Plan {
  std::string refused;  // why cuDNN refused the problem ("" when it is ready)
  std::string what;     // the call that is timed
  // softmax: the tensors of the legacy call
  LegacyTensor x, y;
  // the graph API's baselines: the graph's descriptors (destroyed last made first), its execution
  // plan and workspace, the uids of the arrays, and the scalars passed by value (uids, values)
  std::vector<BackendDesc> owned;
  BackendDescriptor exec = nullptr;
  std::vector<int64_t> uids;
  std::vector<int64_t> value_uids;
  std::vector<float> values;
  DeviceBuffer workspace;
  // attention: the softmax statistics cuDNN's flash-attention engines write beside O (uid
  // kStatsUid), in device memory of the plan's own
  DeviceBuffer stats;
  ~Plan() {
    while (!owned.empty()) owned.pop_back();
  }
};

namespace {

using Plan = CudnnBaselines::Plan;

// Makes and sets backend descriptors that the plan keeps; the first failing call's message is
// kept and every later call does nothing.
class GraphBuilder {
 public:
  GraphBuilder(const CudnnApi& api, Plan& plan) : api_(api), plan_(plan) {}
  BackendDescriptor make(int type, const char* what) {
    if (!ok()) return nullptr;
    plan_.owned.emplace_back(api_, type);
    check(plan_.owned.back().status(), what);
    return plan_.owned.back().get();
  }
  void set(BackendDescriptor d, int name, int type, int64_t n, const void* v, const char* what) {
    if (ok()) check(api_.BackendSetAttribute(d, name, type, n, v), what);
  }
  void link(BackendDescriptor d, int name, BackendDescriptor v, const char* what) {
    set(d, name, cudnn::kTypeBackendDescriptor, 1, &v, what);
  }
  void finalize(BackendDescriptor d, const char* what) {
    if (ok()) check(api_.BackendFinalize(d), what);
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void check(StatusCode s, const char* what) {
    if (s != cudnn::kSuccess) error_ = fmt::format("{}: {}", what, api_.status_text(s));
  }
  const CudnnApi& api_;
  Plan& plan_;
  std::string error_;
};

// How a tensor of the graph holds its values: in device memory (an array of the variant pack), by
// value (a host scalar of the variant pack), or nowhere (virtual: an intermediate of a fused
// graph).
enum class Held { memory, by_value, virtual_ };

// A 4-dimensional tensor of the graph.
BackendDescriptor graph_tensor(GraphBuilder& g, int64_t uid, int dtype, std::array<int64_t, 4> dims,
                               std::array<int64_t, 4> strides, Held held = Held::memory) {
  BackendDescriptor t = g.make(cudnn::kTensorDescriptor, "cudnnBackendCreateDescriptor (tensor)");
  g.set(t, cudnn::kAttrTensorDataType, cudnn::kTypeDataType, 1, &dtype, "tensor data type");
  g.set(t, cudnn::kAttrTensorDimensions, cudnn::kTypeInt64, 4, dims.data(), "tensor dimensions");
  g.set(t, cudnn::kAttrTensorStrides, cudnn::kTypeInt64, 4, strides.data(), "tensor strides");
  g.set(t, cudnn::kAttrTensorUniqueId, cudnn::kTypeInt64, 1, &uid, "tensor uid");
  g.set(t, cudnn::kAttrTensorByteAlignment, cudnn::kTypeInt64, 1, &kByteAlignment,
        "tensor alignment");
  const bool yes = true;
  if (held == Held::by_value)
    g.set(t, cudnn::kAttrTensorIsByValue, cudnn::kTypeBoolean, 1, &yes, "tensor by value");
  if (held == Held::virtual_)
    g.set(t, cudnn::kAttrTensorIsVirtual, cudnn::kTypeBoolean, 1, &yes, "tensor virtual");
  g.finalize(t, fmt::format("tensor {}", uid).c_str());
  return t;
}

// The normalization forward (inference) of `mode` over rows of `cols`: X, scale, [bias] -> Y
// (the arrays of uids 1, 2, ... with cuDNN's `dtypes`), finalized.
BackendDescriptor norm_operation(GraphBuilder& g, int mode, int64_t rows, int64_t cols,
                                 const std::vector<int>& dtypes, Plan& p) {
  for (size_t i = 0; i < dtypes.size(); ++i) p.uids.push_back(static_cast<int64_t>(i) + 1);
  const bool bias = dtypes.size() == 4;
  std::vector<BackendDescriptor> t;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const bool row_wide = i == 0 || i + 1 == dtypes.size();  // X and Y; the others are of N
    t.push_back(graph_tensor(g, p.uids[i], dtypes[i], {row_wide ? rows : 1, cols, 1, 1},
                             {cols, 1, cols, cols}));
  }
  BackendDescriptor eps =
      graph_tensor(g, kEpsilonUid, cudnn::kDataFloat, {1, 1, 1, 1}, {1, 1, 1, 1}, Held::by_value);
  BackendDescriptor op =
      g.make(cudnn::kNormForwardDescriptor, "cudnnBackendCreateDescriptor (normalization)");
  const int phase = cudnn::kNormFwdInference;
  g.set(op, cudnn::kAttrNormFwdMode, cudnn::kTypeNormMode, 1, &mode, "normalization mode");
  g.set(op, cudnn::kAttrNormFwdPhase, cudnn::kTypeNormFwdPhase, 1, &phase, "normalization phase");
  g.link(op, cudnn::kAttrNormFwdXDesc, t.front(), "normalization X");
  g.link(op, cudnn::kAttrNormFwdScaleDesc, t[1], "normalization scale");
  if (bias) g.link(op, cudnn::kAttrNormFwdBiasDesc, t[2], "normalization bias");
  g.link(op, cudnn::kAttrNormFwdEpsilonDesc, eps, "normalization epsilon");
  g.link(op, cudnn::kAttrNormFwdYDesc, t.back(), "normalization Y");
  g.finalize(op, "the normalization forward");
  return op;
}

// The operation graph of one normalization forward, finalized (without a handle, cuDNN checks it
// all the same, as far as it can without a device).
BackendDescriptor norm_graph(GraphBuilder& g, cudnn::Handle handle, int mode, int64_t rows,
                             int64_t cols, const std::vector<int>& dtypes, Plan& p) {
  BackendDescriptor op = norm_operation(g, mode, rows, cols, dtypes, p);
  BackendDescriptor graph =
      g.make(cudnn::kOperationGraphDescriptor, "cudnnBackendCreateDescriptor (graph)");
  g.link(graph, cudnn::kAttrOperationGraphOps, op, "graph operations");
  if (handle)
    g.set(graph, cudnn::kAttrOperationGraphHandle, cudnn::kTypeHandle, 1, &handle, "graph handle");
  g.finalize(graph, "the operation graph");
  return graph;
}

// The engine configurations cuDNN's heuristics of `mode` propose for `graph`, best first; empty,
// with the reason in `why`, when there are none.
std::vector<BackendDesc> engine_configs(const CudnnApi& api, BackendDescriptor graph, int mode,
                                        std::string& why) {
  BackendDesc heur(api, cudnn::kEngineHeurDescriptor);
  StatusCode s = heur.status();
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(heur.get(), cudnn::kAttrEngineHeurOperationGraph,
                                cudnn::kTypeBackendDescriptor, 1, &graph);
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(heur.get(), cudnn::kAttrEngineHeurMode, cudnn::kTypeHeurMode, 1,
                                &mode);
  if (s == cudnn::kSuccess) s = api.BackendFinalize(heur.get());
  int64_t count = 0;
  if (s == cudnn::kSuccess)
    s = api.BackendGetAttribute(heur.get(), cudnn::kAttrEngineHeurResults,
                                cudnn::kTypeBackendDescriptor, 0, &count, nullptr);
  std::vector<BackendDesc> configs;
  std::vector<BackendDescriptor> raw;
  for (int64_t i = 0; s == cudnn::kSuccess && i < count; ++i) {
    configs.emplace_back(api, cudnn::kEngineCfgDescriptor);
    s = configs.back().status();
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  if (s == cudnn::kSuccess && count > 0)
    s = api.BackendGetAttribute(heur.get(), cudnn::kAttrEngineHeurResults,
                                cudnn::kTypeBackendDescriptor, count, &got, raw.data());
  if (s != cudnn::kSuccess) {
    why = "the engine heuristics: " + api.status_text(s);
    return {};
  }
  while (static_cast<int64_t>(configs.size()) > std::clamp<int64_t>(got, 0, count))
    configs.pop_back();
  if (configs.empty()) why = "cuDNN's heuristics propose no engine for this graph";
  return configs;
}

// An execution plan of engine configuration `config`, finalized; nullopt (and the reason in `s`)
// when cuDNN does not finalize it.
std::optional<BackendDesc> execution_plan(const CudnnApi& api, cudnn::Handle handle,
                                          BackendDescriptor config, StatusCode& s) {
  BackendDesc plan(api, cudnn::kExecutionPlanDescriptor);
  s = plan.status();
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(plan.get(), cudnn::kAttrExecutionPlanHandle, cudnn::kTypeHandle, 1,
                                &handle);
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(plan.get(), cudnn::kAttrExecutionPlanEngineConfig,
                                cudnn::kTypeBackendDescriptor, 1, &config);
  if (s == cudnn::kSuccess) s = api.BackendFinalize(plan.get());
  if (s != cudnn::kSuccess) return std::nullopt;
  return plan;
}

// The first engine configuration of the heuristics (mode A, then the fallback list) that
// finalizes into an execution plan, kept in `p`; false, with the last refusal in `why`, when
// none does.
bool choose_plan(const CudnnApi& api, cudnn::Handle handle, BackendDescriptor graph, Plan& p,
                 std::string& why) {
  for (int mode : {cudnn::kHeurModeA, cudnn::kHeurModeFallback}) {
    std::vector<BackendDesc> configs = engine_configs(api, graph, mode, why);
    for (BackendDesc& config : configs) {
      StatusCode s = cudnn::kSuccess;
      std::optional<BackendDesc> plan = execution_plan(api, handle, config.get(), s);
      if (!plan) {
        why = "no engine that cuDNN's heuristics propose takes this graph: " + api.status_text(s);
        continue;
      }
      p.exec = plan->get();
      p.owned.push_back(std::move(config));
      p.owned.push_back(std::move(*plan));
      return true;
    }
  }
  return false;
}

// The execution plan of `graph` and its workspace, kept in `p`; p.refused says why not.
void plan_graph(const CudnnApi& api, cudnn::Handle handle, const CudnnMemory& memory,
                BackendDescriptor graph, Plan& p) {
  std::string why;
  if (!choose_plan(api, handle, graph, p, why)) {
    p.refused = why;
    return;
  }
  int64_t bytes = 0, n = 0;
  if (StatusCode s = api.BackendGetAttribute(p.exec, cudnn::kAttrExecutionPlanWorkspaceSize,
                                             cudnn::kTypeInt64, 1, &n, &bytes);
      s != cudnn::kSuccess) {
    p.refused = "the execution plan's workspace size: " + api.status_text(s);
    return;
  }
  if (bytes <= 0) return;
  auto w = memory.alloc(static_cast<size_t>(bytes));
  if (!w) {
    p.refused = fmt::format("cuDNN's workspace of {} bytes: {}", bytes, w.error());
    return;
  }
  p.workspace = *w;
}

// The graph, execution plan and workspace of a normalization forward; p.refused says why not.
void build_norm(const CudnnApi& api, cudnn::Handle handle, const CudnnMemory& memory, int mode,
                int64_t rows, int64_t cols, const std::vector<int>& dtypes, Plan& p) {
  const bool rms = mode == cudnn::kRmsNorm;
  p.what = "cudnnBackendExecute";
  p.value_uids = {kEpsilonUid};
  p.values = {rms ? 1e-6f : 1e-5f};  // the families' conventions (docs/families.md)
  GraphBuilder g(api, p);
  BackendDescriptor graph = norm_graph(g, handle, mode, rows, cols, dtypes, p);
  if (!g.ok()) {
    p.refused =
        fmt::format("cuDNN refused the {} graph: {}", rms ? "RMS norm" : "layer norm", g.error());
    return;
  }
  plan_graph(api, handle, memory, graph, p);
}

// The scalar `name` of a task's shape; -1 where the shape has none.
int64_t scalar_of(const std::map<std::string, int64_t>& values, const char* name) {
  auto it = values.find(name);
  return it == values.end() ? -1 : it->second;
}

// ---- Scaled dot-product attention: the fused graph cuDNN's flash-attention engines take ----

// The attention problem of one shape: [batch, heads, sequence, head_dim] arrays of cuDNN's
// `dtype`, and the causal mask as cuDNN's graph writes it.
struct AttentionProblem {
  int64_t b = 0, h = 0, sq = 0, skv = 0, d = 0;
  int dtype = -1;
  bool causal = false;  // cuDNN's top-left causal mask: key j kept for row i when i >= j
};

// The uids of the attention graph: Q, K, V, O take 1 to 4; the scalars by value, then the
// intermediates (virtual) from kVirtualUid on.
constexpr int64_t kStatsUid = 5;
constexpr int64_t kScaleUid = 101, kMaskValueUid = 102, kVirtualUid = 200;

// A descriptor of `type` whose arithmetic is float (`precision_attr`), not yet finalized.
BackendDescriptor float_descriptor(GraphBuilder& g, int type, int precision_attr,
                                   const char* what) {
  const int precision = cudnn::kDataFloat;
  BackendDescriptor desc = g.make(type, what);
  g.set(desc, precision_attr, cudnn::kTypeDataType, 1, &precision, what);
  return desc;
}

// An operation of `type` with its tensors and descriptor linked (attribute, descriptor; a null
// descriptor is left out), finalized.
BackendDescriptor operation(GraphBuilder& g, int type,
                            std::initializer_list<std::pair<int, BackendDescriptor>> links,
                            const std::string& what) {
  BackendDescriptor op = g.make(type, what.c_str());
  for (const auto& [attr, d] : links)
    if (d) g.link(op, attr, d, what.c_str());
  g.finalize(op, what.c_str());
  return op;
}

// A pointwise operation of `mode` (float arithmetic) from x [, b [, t]] to y; `axis` for
// GEN_INDEX.
BackendDescriptor pointwise_op(GraphBuilder& g, int mode, BackendDescriptor x, BackendDescriptor b,
                               BackendDescriptor t, BackendDescriptor y, int64_t axis = -1) {
  const std::string what = fmt::format("pointwise operation (mode {})", mode);
  BackendDescriptor desc = float_descriptor(g, cudnn::kPointwiseDescriptor,
                                            cudnn::kAttrPointwiseMathPrecision, what.c_str());
  g.set(desc, cudnn::kAttrPointwiseMode, cudnn::kTypePointwiseMode, 1, &mode, what.c_str());
  if (axis >= 0) g.set(desc, cudnn::kAttrPointwiseAxis, cudnn::kTypeInt64, 1, &axis, what.c_str());
  g.finalize(desc, what.c_str());
  return operation(g, cudnn::kOperationPointwiseDescriptor,
                   {{cudnn::kAttrOperationPointwiseDesc, desc},
                    {cudnn::kAttrOperationPointwiseX, x},
                    {cudnn::kAttrOperationPointwiseB, b},
                    {cudnn::kAttrOperationPointwiseT, t},
                    {cudnn::kAttrOperationPointwiseY, y}},
                   what);
}

// A reduction `op_kind` (cudnnReduceTensorOp_t) of x into y, in float.
BackendDescriptor reduction_op(GraphBuilder& g, int op_kind, BackendDescriptor x,
                               BackendDescriptor y) {
  const std::string what = fmt::format("reduction (operator {})", op_kind);
  BackendDescriptor desc = float_descriptor(g, cudnn::kReductionDescriptor,
                                            cudnn::kAttrReductionComputeType, what.c_str());
  g.set(desc, cudnn::kAttrReductionOperator, cudnn::kTypeReductionOperator, 1, &op_kind,
        what.c_str());
  g.finalize(desc, what.c_str());
  return operation(g, cudnn::kOperationReductionDescriptor,
                   {{cudnn::kAttrOperationReductionX, x},
                    {cudnn::kAttrOperationReductionY, y},
                    {cudnn::kAttrOperationReductionDesc, desc}},
                   what);
}

// The batched matrix product c = a b, accumulated in float.
BackendDescriptor matmul_op(GraphBuilder& g, BackendDescriptor a, BackendDescriptor b,
                            BackendDescriptor c) {
  BackendDescriptor desc =
      float_descriptor(g, cudnn::kMatmulDescriptor, cudnn::kAttrMatmulComputeType, "matmul");
  g.finalize(desc, "matmul descriptor");
  return operation(g, cudnn::kOperationMatmulDescriptor,
                   {{cudnn::kAttrOperationMatmulA, a},
                    {cudnn::kAttrOperationMatmulB, b},
                    {cudnn::kAttrOperationMatmulC, c},
                    {cudnn::kAttrOperationMatmulDesc, desc}},
                   "matmul operation");
}

// The masked scores: S where the key is attended (row i keeps key j when i >= j), the lowest
// float elsewhere.
BackendDescriptor causal_mask(GraphBuilder& g, const AttentionProblem& a, BackendDescriptor scores,
                              int64_t& uid, std::vector<BackendDescriptor>& ops) {
  const std::array<int64_t, 4> dims{a.b, a.h, a.sq, a.skv};
  const std::array<int64_t, 4> strides{a.h * a.sq * a.skv, a.sq * a.skv, a.skv, 1};
  const std::array<int64_t, 4> one{1, 1, 1, 1};
  auto virt = [&](int dtype) {
    return graph_tensor(g, uid++, dtype, dims, strides, Held::virtual_);
  };
  BackendDescriptor row = virt(cudnn::kDataFloat), col = virt(cudnn::kDataFloat);
  ops.push_back(pointwise_op(g, cudnn::kPointwiseGenIndex, scores, nullptr, nullptr, row, 2));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseGenIndex, scores, nullptr, nullptr, col, 3));
  BackendDescriptor keep = virt(cudnn::kDataBoolean);
  ops.push_back(pointwise_op(g, cudnn::kPointwiseCmpGe, row, col, nullptr, keep));
  BackendDescriptor lowest =
      graph_tensor(g, kMaskValueUid, cudnn::kDataFloat, one, one, Held::by_value);
  BackendDescriptor masked = virt(cudnn::kDataFloat);
  ops.push_back(pointwise_op(g, cudnn::kPointwiseBinarySelect, scores, lowest, keep, masked));
  return masked;
}

// The softmax of the scores along the keys (maximum, exponentials, their sum, the quotients),
// the probabilities in the arrays' type as the second product's A. Beside them, the statistics
// max + log(sum) of every row into the tensor of uid kStatsUid: cuDNN's flash-attention engines
// take the graph only with that output (a training graph; cuDNN 9.14 proposes no engine for the
// graph without it).
BackendDescriptor softmax_ops(GraphBuilder& g, const AttentionProblem& a, BackendDescriptor scores,
                              int64_t& uid, std::vector<BackendDescriptor>& ops) {
  const std::array<int64_t, 4> dims{a.b, a.h, a.sq, a.skv};
  const std::array<int64_t, 4> strides{a.h * a.sq * a.skv, a.sq * a.skv, a.skv, 1};
  const std::array<int64_t, 4> row_dims{a.b, a.h, a.sq, 1};
  const std::array<int64_t, 4> row_strides{a.h * a.sq, a.sq, 1, 1};
  auto full = [&](int dtype) {
    return graph_tensor(g, uid++, dtype, dims, strides, Held::virtual_);
  };
  auto per_row = [&] {
    return graph_tensor(g, uid++, cudnn::kDataFloat, row_dims, row_strides, Held::virtual_);
  };
  BackendDescriptor max = per_row(), shifted = full(cudnn::kDataFloat);
  BackendDescriptor e = full(cudnn::kDataFloat), sum = per_row(), p = full(a.dtype);
  BackendDescriptor log_sum = per_row();
  BackendDescriptor stats = graph_tensor(g, kStatsUid, cudnn::kDataFloat, row_dims, row_strides);
  ops.push_back(reduction_op(g, cudnn::kReduceMax, scores, max));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseSub, scores, max, nullptr, shifted));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseExp, shifted, nullptr, nullptr, e));
  ops.push_back(reduction_op(g, cudnn::kReduceAdd, e, sum));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseLog, sum, nullptr, nullptr, log_sum));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseAdd, max, log_sum, nullptr, stats));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseDiv, e, sum, nullptr, p));
  return p;
}

// The operation graph of O = softmax(mask(Q K^T * scale)) V, finalized (without a handle, cuDNN
// checks what it can without a device): Q, K, V, O take uids 1 to 4 in `p`, the statistics 5.
BackendDescriptor attention_graph(GraphBuilder& g, cudnn::Handle handle, const AttentionProblem& a,
                                  Plan& p) {
  p.uids = {1, 2, 3, 4};
  const std::array<int64_t, 4> one{1, 1, 1, 1};
  const std::array<int64_t, 4> q_dims{a.b, a.h, a.sq, a.d},
      q_strides{a.h * a.sq * a.d, a.sq * a.d, a.d, 1};
  const std::array<int64_t, 4> kv_strides{a.h * a.skv * a.d, a.skv * a.d, a.d, 1};
  // K as K^T: [b, h, d, skv] over the same memory (the last two strides exchanged).
  BackendDescriptor q = graph_tensor(g, 1, a.dtype, q_dims, q_strides);
  BackendDescriptor kt =
      graph_tensor(g, 2, a.dtype, {a.b, a.h, a.d, a.skv}, {kv_strides[0], kv_strides[1], 1, a.d});
  BackendDescriptor v = graph_tensor(g, 3, a.dtype, {a.b, a.h, a.skv, a.d}, kv_strides);
  BackendDescriptor o = graph_tensor(g, 4, a.dtype, q_dims, q_strides);
  BackendDescriptor scale = graph_tensor(g, kScaleUid, cudnn::kDataFloat, one, one, Held::by_value);
  int64_t uid = kVirtualUid;
  const std::array<int64_t, 4> s_dims{a.b, a.h, a.sq, a.skv};
  const std::array<int64_t, 4> s_strides{a.h * a.sq * a.skv, a.sq * a.skv, a.skv, 1};
  BackendDescriptor s =
      graph_tensor(g, uid++, cudnn::kDataFloat, s_dims, s_strides, Held::virtual_);
  BackendDescriptor scaled =
      graph_tensor(g, uid++, cudnn::kDataFloat, s_dims, s_strides, Held::virtual_);
  std::vector<BackendDescriptor> ops;
  ops.push_back(matmul_op(g, q, kt, s));
  ops.push_back(pointwise_op(g, cudnn::kPointwiseMul, s, scale, nullptr, scaled));
  BackendDescriptor scores = scaled;
  if (a.causal) scores = causal_mask(g, a, scaled, uid, ops);
  BackendDescriptor probabilities = softmax_ops(g, a, scores, uid, ops);
  ops.push_back(matmul_op(g, probabilities, v, o));
  BackendDescriptor graph =
      g.make(cudnn::kOperationGraphDescriptor, "cudnnBackendCreateDescriptor (graph)");
  g.set(graph, cudnn::kAttrOperationGraphOps, cudnn::kTypeBackendDescriptor,
        static_cast<int64_t>(ops.size()), ops.data(), "graph operations");
  if (handle)
    g.set(graph, cudnn::kAttrOperationGraphHandle, cudnn::kTypeHandle, 1, &handle, "graph handle");
  g.finalize(graph, "the operation graph");
  return graph;
}

// The attention problem of the task's scalars, or why cuDNN's graph cannot state it.
Result<AttentionProblem> attention_problem(const std::map<std::string, int64_t>& values,
                                           int dtype) {
  auto get = [&](const char* name) { return scalar_of(values, name); };
  AttentionProblem a;
  a.b = get("B"), a.h = get("H"), a.sq = get("SQ"), a.skv = get("SKV"), a.d = get("D");
  a.dtype = dtype;
  const int64_t causal = get("CAUSAL");
  if (a.b <= 0 || a.h <= 0 || a.sq <= 0 || a.skv <= 0 || a.d <= 0 || causal < 0)
    return Status::error("the cuDNN attention baseline needs scalars B, H, SQ, SKV, D and CAUSAL");
  if (dtype != cudnn::kDataHalf && dtype != cudnn::kDataBfloat16)
    return Status::error("cuDNN's fused attention takes fp16 and bf16 arrays");
  // The family's mask keeps key j for row i when j <= i + SKV - SQ: no key masked for a single
  // query row, cuDNN's top-left diagonal when SQ = SKV. The diagonal shifted by SKV - SQ (an ADD
  // to the row index before the comparison) gave other values than the family's on cuDNN 9.14,
  // so those shapes have no cuDNN baseline.
  if (causal != 0 && a.sq > 1 && a.sq != a.skv)
    return Status::error(
        "cuDNN's causal mask is the diagonal of SQ = SKV (or none, for one query row); the "
        "family's mask with SQ != SKV is not built for cuDNN, so this shape has no cuDNN "
        "baseline");
  a.causal = causal != 0 && a.sq > 1;
  return a;
}

// The graph, execution plan and workspace of the attention forward; p.refused says why not.
void build_attention(const CudnnApi& api, cudnn::Handle handle, const CudnnMemory& memory,
                     const AttentionProblem& a, Plan& p) {
  p.what = "cudnnBackendExecute (fused attention)";
  // The variant pack holds exactly the graph's tensors: the mask value only with the mask.
  p.value_uids = {kScaleUid};
  p.values = {1.0f / std::sqrt(static_cast<float>(a.d))};
  if (a.causal) {
    p.value_uids.push_back(kMaskValueUid);
    p.values.push_back(std::numeric_limits<float>::lowest());
  }
  GraphBuilder g(api, p);
  BackendDescriptor graph = attention_graph(g, handle, a, p);
  if (!g.ok()) {
    p.refused = "cuDNN refused the attention graph: " + g.error();
    return;
  }
  plan_graph(api, handle, memory, graph, p);
  if (!p.refused.empty()) return;
  const auto bytes = static_cast<size_t>(a.b * a.h * a.sq) * sizeof(float);
  auto stats = memory.alloc(bytes);
  if (!stats) {
    p.refused = fmt::format("the softmax statistics of {} bytes: {}", bytes, stats.error());
    return;
  }
  p.stats = *stats;
}

// A legacy NCHW tensor of `rows` x `cols` x 1 x 1.
StatusCode legacy_tensor(const CudnnApi& api, LegacyTensor& t, int dtype, int rows, int cols) {
  t.api = &api;
  StatusCode s = api.CreateTensorDescriptor(&t.d);
  if (s != cudnn::kSuccess) {
    t.d = nullptr;
    return s;
  }
  return api.SetTensor4dDescriptor(t.d, cudnn::kTensorNchw, dtype, rows, cols, 1, 1);
}

// The tensors of the legacy softmax over rows (instance mode: every C x H x W of one N).
void build_softmax(const CudnnApi& api, const std::vector<int>& dtypes, int64_t rows, int64_t cols,
                   Plan& p) {
  p.what = "cudnnSoftmaxForward";
  if (rows > INT_MAX || cols > INT_MAX) {
    p.refused = "cudnnSoftmaxForward takes int dimensions: R and N must be below 2^31";
    return;
  }
  const int r = static_cast<int>(rows), c = static_cast<int>(cols);
  StatusCode s = legacy_tensor(api, p.x, dtypes.front(), r, c);
  if (s == cudnn::kSuccess) s = legacy_tensor(api, p.y, dtypes.back(), r, c);
  if (s != cudnn::kSuccess) p.refused = "cudnnSetTensor4dDescriptor: " + api.status_text(s);
}

// The variant pack of one execution: the arrays' device pointers (in the plan's uid order),
// the host values of its scalars and the workspace; nullopt (and the reason in `s`) when refused.
std::optional<BackendDesc> variant_pack(const CudnnApi& api, Plan& p,
                                        const std::vector<void*>& arrays, StatusCode& s) {
  std::vector<int64_t> uids = p.uids;
  std::vector<void*> pointers = arrays;
  if (p.stats.handle) {
    uids.push_back(kStatsUid);
    pointers.push_back(p.stats.handle);
  }
  for (size_t i = 0; i < p.value_uids.size(); ++i) {
    uids.push_back(p.value_uids[i]);
    pointers.push_back(&p.values[i]);
  }
  void* workspace = p.workspace.handle;
  const auto n = static_cast<int64_t>(uids.size());
  BackendDesc pack(api, cudnn::kVariantPackDescriptor);
  s = pack.status();
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(pack.get(), cudnn::kAttrVariantPackUniqueIds, cudnn::kTypeInt64, n,
                                uids.data());
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(pack.get(), cudnn::kAttrVariantPackDataPointers,
                                cudnn::kTypeVoidPtr, n, pointers.data());
  if (s == cudnn::kSuccess)
    s = api.BackendSetAttribute(pack.get(), cudnn::kAttrVariantPackWorkspace, cudnn::kTypeVoidPtr,
                                1, &workspace);
  if (s == cudnn::kSuccess) s = api.BackendFinalize(pack.get());
  if (s != cudnn::kSuccess) return std::nullopt;
  return pack;
}

// The outcome of a call whose status says that cuDNN refused it or failed while running.
LaunchOutcome failed_call(const CudnnApi& api, const std::string& what, StatusCode s) {
  LaunchOutcome o;
  o.disposition = is_refusal(s) ? Disposition::not_run : Disposition::launch_failed;
  o.message = fmt::format("{} failed: {}", what, api.status_text(s));
  return o;
}

}  // namespace

bool cudnn_covers(std::string_view family) { return arrays_of(family) != nullptr; }

Status check_cudnn_attention_graph(const CudnnApi& api,
                                   const std::map<std::string, int64_t>& values, int dtype) {
  if (!api.ready()) return Status::error("cuDNN is not available: " + api.error);
  Result<AttentionProblem> a = attention_problem(values, dtype);
  if (!a) return Status::error(a.error());
  Plan p;
  GraphBuilder g(api, p);
  attention_graph(g, nullptr, *a, p);
  return g.ok() ? Status::ok() : Status::error(g.error());
}

Status check_cudnn_norm_graph(const CudnnApi& api, std::string_view family, int64_t rows,
                              int64_t cols, const std::vector<int>& dtypes) {
  if (!api.ready()) return Status::error("cuDNN is not available: " + api.error);
  Plan p;
  GraphBuilder g(api, p);
  norm_graph(g, nullptr, family == "rmsnorm" ? cudnn::kRmsNorm : cudnn::kLayerNorm, rows, cols,
             dtypes, p);
  return g.ok() ? Status::ok() : Status::error(g.error());
}

CudnnBaselines::CudnnBaselines(const CudnnApi& api, CudnnMemory memory)
    : api_(api), memory_(std::move(memory)) {}

CudnnBaselines::~CudnnBaselines() {
  for (auto& [key, plan] : plans_)
    for (DeviceBuffer* b : {&plan->workspace, &plan->stats})
      if (b->handle) memory_.free(*b);
  plans_.clear();
  if (handle_) api_.Destroy(handle_);
}

void CudnnBaselines::open(std::string_view family, cudnn::Stream stream) {
  if (!cudnn_covers(family) || handle_) return;
  if (!api_.ready()) {
    error_ = "cuDNN is not available: " + api_.error;
    return;
  }
  if (StatusCode s = api_.Create(&handle_); s != cudnn::kSuccess) {
    handle_ = nullptr;
    error_ = "cudnnCreate failed: " + api_.status_text(s);
    return;
  }
  if (StatusCode s = api_.SetStream(handle_, stream); s != cudnn::kSuccess) {
    error_ = "cudnnSetStream failed: " + api_.status_text(s);
    api_.Destroy(handle_);
    handle_ = nullptr;
  }
}

CudnnBaselines::Plan& CudnnBaselines::plan_for(const std::string& family,
                                               const std::vector<int>& dtypes,
                                               const std::map<std::string, int64_t>& values) {
  std::string key = fmt::format("{} {} {}", family, fmt::join(dtypes, ","), fmt::join(values, ","));
  std::unique_ptr<Plan>& plan = plans_[key];
  if (plan) return *plan;
  plan = std::make_unique<Plan>();
  if (family == "attention") {
    Result<AttentionProblem> a = attention_problem(values, dtypes.front());
    if (!a)
      plan->refused = a.error();
    else
      build_attention(api_, handle_, memory_, *a, *plan);
    return *plan;
  }
  const int64_t rows = scalar_of(values, "R"), cols = scalar_of(values, "N");
  if (rows <= 0 || cols <= 0)
    plan->refused = "the cuDNN baseline needs scalars R and N (positive)";
  else if (family == "softmax")
    build_softmax(api_, dtypes, rows, cols, *plan);
  else
    build_norm(api_, handle_, memory_, family == "rmsnorm" ? cudnn::kRmsNorm : cudnn::kLayerNorm,
               rows, cols, dtypes, *plan);
  return *plan;
}

LaunchOutcome CudnnBaselines::run(const RunnerTask& task, const RunnerJob& job,
                                  std::vector<DeviceBuffer>& arrays, const CudnnTimer& timer) {
  LaunchOutcome no;
  no.disposition = Disposition::not_run;
  const std::vector<std::string>* names = arrays_of(job.family);
  if (names == nullptr) {
    no.message = fmt::format(
        "cuDNN is a baseline only for families softmax, rmsnorm, layernorm and attention, not "
        "'{}'",
        job.family);
    return no;
  }
  if (handle_ == nullptr) {
    no.message = error_.empty() ? "cuDNN was not opened for this job" : error_;
    return no;
  }
  std::vector<void*> pointers;
  std::vector<int> dtypes;
  for (const std::string& name : *names) {
    auto it = std::find_if(job.arrays.begin(), job.arrays.end(),
                           [&](const ArraySpec& a) { return a.name == name; });
    const auto i = static_cast<size_t>(it - job.arrays.begin());
    if (it == job.arrays.end() || i >= arrays.size()) {
      no.message =
          fmt::format("the cuDNN {} baseline needs arrays {}", job.family, fmt::join(*names, ", "));
      return no;
    }
    pointers.push_back(arrays[i].handle);
    dtypes.push_back(cudnn_dtype(it->dtype));
  }
  if (std::count(dtypes.begin(), dtypes.end(), -1) > 0) {
    no.message = "the cuDNN baseline takes f32, f16 and bf16 arrays";
    return no;
  }
  Plan& plan = plan_for(job.family, dtypes, task.shape.values);
  if (!plan.refused.empty()) {
    no.message = plan.refused;
    return no;
  }
  return execute(plan, pointers, timer);
}

LaunchOutcome CudnnBaselines::execute(Plan& p, const std::vector<void*>& pointers,
                                      const CudnnTimer& timer) {
  StatusCode s = cudnn::kSuccess;
  LaunchOutcome o;
  if (p.exec == nullptr) {  // the legacy softmax: Y = 1 * softmax(X) + 0 * Y
    const float alpha = 1.0f, beta = 0.0f;
    o = timer(
        [&] {
          s = api_.SoftmaxForward(handle_, cudnn::kSoftmaxAccurate, cudnn::kSoftmaxModeInstance,
                                  &alpha, p.x.d, pointers.front(), &beta, p.y.d, pointers.back());
        },
        p.what);
  } else {
    std::optional<BackendDesc> pack = variant_pack(api_, p, pointers, s);
    if (!pack) return failed_call(api_, "the variant pack", s);
    o = timer([&] { s = api_.BackendExecute(handle_, p.exec, pack->get()); }, p.what);
  }
  if (o.disposition == Disposition::passed && s != cudnn::kSuccess)
    return failed_call(api_, p.what, s);
  return o;
}

}  // namespace peak
