// --devices: parsing, and the selection over a fake host's devices (a probe answering from a
// table, as a runner would).
#include "engine/devices.h"

#include <gtest/gtest.h>

#include "engine/evaluate_internal.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <fmt/format.h>

namespace peak {
namespace {

DeviceFacts gpu(const std::string& name, const std::string& index) {
  DeviceFacts f;
  f.backend = "cuda";
  f.name = name;
  f.extra["cuda_device_index"] = index;
  return f;
}

// Three devices: two H100s and an A100 in between; "" is the best (device 0). Counts the probes.
struct FakeHost {
  std::map<std::string, DeviceFacts> devices = {{"", gpu("NVIDIA H100 80GB HBM3", "0")},
                                                {"0", gpu("NVIDIA H100 80GB HBM3", "0")},
                                                {"1", gpu("NVIDIA A100-SXM4-80GB", "1")},
                                                {"2", gpu("NVIDIA H100 80GB HBM3", "2")}};
  std::mutex mu;
  std::vector<std::string> probed;
  DeviceProbe probe() {
    return [this](const std::string& s) -> Result<DeviceFacts> {
      std::lock_guard<std::mutex> lock(mu);
      probed.push_back(s);
      auto it = devices.find(s);
      if (it == devices.end()) return make_error(fmt::format("CUDA device {} does not exist", s));
      return it->second;
    };
  }
};

std::vector<std::string> selectors(const DeviceSelection& s) {
  std::vector<std::string> out;
  for (const auto& d : s.devices) out.push_back(d.selector);
  return out;
}

TEST(Devices, ParsesAllIndicesAndNames) {
  auto a = parse_devices_spec(" ALL ");
  ASSERT_TRUE(a) << a.error();
  EXPECT_TRUE(a->all);
  auto i = parse_devices_spec("0, 2");
  ASSERT_TRUE(i) << i.error();
  EXPECT_EQ(i->indices, (std::vector<int>{0, 2}));
  auto one = parse_devices_spec("3");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->indices, std::vector<int>{3});
  auto n = parse_devices_spec("H100");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->name, "H100");
  EXPECT_TRUE(n->indices.empty());
}

TEST(Devices, RefusesMalformedSpecsSayingWhatToWrite) {
  for (const char* bad : {"", "  ", "0,,1", "0,H100", "1,", "-1,2", "0,0"}) {
    auto r = parse_devices_spec(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error_kind(), ErrorKind::input) << bad;
  }
  EXPECT_NE(parse_devices_spec("0,H100").error().find("'H100' is not a device index; write all, "
                                                      "device indices (0,1) or one name substring"),
            std::string::npos)
      << parse_devices_spec("0,H100").error();
  EXPECT_NE(parse_devices_spec("0,0").error().find("device 0 is named twice"), std::string::npos);
  EXPECT_NE(parse_devices_spec("").error().find("--devices needs a value"), std::string::npos);
}

TEST(Devices, IndicesOfOneModelAreUsedInTheirOrder) {
  FakeHost host;
  auto s = select_devices("2,0", host.probe());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(selectors(*s), (std::vector<std::string>{"2", "0"}));  // the first bench shape on 2
  EXPECT_TRUE(s->left_out.empty());
  EXPECT_EQ(
      s->text(),
      "2 devices: 2 (NVIDIA H100 80GB HBM3), 0 (NVIDIA H100 80GB HBM3); bench shapes in turn");
  std::sort(host.probed.begin(), host.probed.end());
  EXPECT_EQ(host.probed, (std::vector<std::string>{"0", "2"}));  // nothing else probed
}

// Each probe starts a runner: a list of indices is probed all at once. Every probe here waits
// until all three have begun, which only happens when they run together (the wait is bounded so
// that one at a time fails instead of hanging).
TEST(Devices, TheIndicesAreProbedAllAtOnce) {
  std::mutex mu;
  std::condition_variable cv;
  int begun = 0;
  DeviceProbe probe = [&](const std::string& s) -> Result<DeviceFacts> {
    std::unique_lock<std::mutex> lock(mu);
    ++begun;
    cv.notify_all();
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return begun == 3; }))
      return make_error("probed alone");
    return gpu("NVIDIA H200", s);
  };
  auto s = select_devices("0,1,2", probe);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(selectors(*s), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(Devices, DevicesOfDifferentModelsAreRefusedAndNamed) {
  FakeHost host;
  auto s = select_devices("0,1", host.probe());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error_kind(), ErrorKind::input);
  EXPECT_NE(s.error().find("different models"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("NVIDIA A100-SXM4-80GB on device 1"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("NVIDIA H100 80GB HBM3 on device 0"), std::string::npos) << s.error();
  // A name that matches both models is refused the same way.
  auto n = select_devices("nvidia", host.probe());
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().find("on devices 0, 2"), std::string::npos) << n.error();
}

TEST(Devices, AllKeepsTheBestDevicesModelAndSaysWhatWasLeftOut) {
  FakeHost host;
  auto s = select_devices("all", host.probe());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(selectors(*s), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(s->left_out, std::vector<std::string>{"1 (NVIDIA A100-SXM4-80GB), another model"});
  EXPECT_NE(s->text().find("left out: 1 (NVIDIA A100-SXM4-80GB), another model"), std::string::npos)
      << s->text();
}

TEST(Devices, ANameSubstringSelectsEveryDeviceThatHoldsIt) {
  FakeHost host;
  auto s = select_devices("h100", host.probe());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(selectors(*s), (std::vector<std::string>{"0", "2"}));
  auto none = select_devices("MI300", host.probe());
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error_kind(), ErrorKind::input);
  EXPECT_NE(none.error().find("no device's name holds 'MI300'; the devices are: 0 (NVIDIA H100"),
            std::string::npos)
      << none.error();
}

TEST(Devices, AMissingIndexIsAnEnvironmentErrorNamingIt) {
  FakeHost host;
  auto s = select_devices("0,7", host.probe());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error_kind(), ErrorKind::environment);
  EXPECT_NE(s.error().find("device 7: CUDA device 7 does not exist"), std::string::npos)
      << s.error();
}

TEST(Devices, TheRunnerIsPointedAtTheIndexTheProbeReported) {
  EXPECT_EQ(runner_selector(gpu("X", "3"), "H100"), "3");
  DeviceFacts vk;
  vk.extra["device_index"] = "1";
  EXPECT_EQ(runner_selector(vk, "1"), "1");
  EXPECT_EQ(runner_selector(DeviceFacts{}, "2"), "2");
}

// A CUDA runner sees its device alone: its index, or its entry of the parent's list.
TEST(Devices, ACudaRunnerSeesItsDeviceAlone) {
  DeviceFacts d;
  d.extra["cuda_device_index"] = "1";
  EXPECT_EQ(cuda_visible_device(d, nullptr), "1");
  EXPECT_EQ(cuda_visible_device(d, ""), "1");
  EXPECT_EQ(cuda_visible_device(d, "4,6"), "6");
  EXPECT_EQ(cuda_visible_device(d, "GPU-aaa, GPU-bbb"), "GPU-bbb");
  EXPECT_EQ(cuda_visible_device(d, "3"), std::nullopt);  // not the parent's view
  DeviceFacts vk;
  vk.extra["device_index"] = "1";
  EXPECT_EQ(cuda_visible_device(vk, nullptr), std::nullopt);
}

// The peak a kernel is judged against (% of peak, faster_than_peak) is the documented one of its
// inputs' precision: FP8 for e4m3 inputs, FP16 for f16 or bf16, FP32 otherwise.
TEST(PeakFor, TheInputsPrecisionChoosesTheDocumentedPeak) {
  DeviceFacts h200 = gpu("NVIDIA H200", "0");
  auto with_inputs = [](std::initializer_list<DType> types) {
    KernelContext ctx;
    for (DType t : types) ctx.arrays.push_back(ArraySpec{"in", t, "1", {}, false});
    ctx.arrays.push_back(ArraySpec{"out", DType::e4m3, "1", {}, true});  // outputs do not count
    return ctx;
  };
  detail::PeakInfo fp8 = detail::peak_for(with_inputs({DType::e4m3, DType::f32}), h200);
  EXPECT_DOUBLE_EQ(fp8.tflops, 1979);
  EXPECT_DOUBLE_EQ(fp8.limit, 1979);
  EXPECT_NE(fp8.source.find("FP8"), std::string::npos) << fp8.source;
  EXPECT_DOUBLE_EQ(detail::peak_for(with_inputs({DType::bf16}), h200).tflops, 989.4);
  EXPECT_DOUBLE_EQ(detail::peak_for(with_inputs({DType::f32}), h200).tflops, 66.9);
}

}  // namespace
}  // namespace peak
