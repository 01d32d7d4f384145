#include "backend/backend.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

TEST(Config, TextIsSortedByName) {
  EXPECT_EQ(config_text({{"TILE_K", 8}, {"BLOCK", 16}}), "BLOCK=16 TILE_K=8");
  EXPECT_EQ(config_text({}), "");
  EXPECT_EQ(config_text({{"N", -3}}), "N=-3");
}

TEST(Config, Json) {
  nlohmann::json j = config_json({{"TILE_K", 8}, {"BLOCK", 16}});
  EXPECT_EQ(j, (nlohmann::json{{"BLOCK", 16}, {"TILE_K", 8}}));
  EXPECT_TRUE(config_json({}).is_object());
  EXPECT_EQ(config_json({}).size(), 0u);
}

TEST(DriverStatistics, JoinTheResourcesAndNameTheRegisters) {
  nlohmann::json r = {{"kernels", {{"main", {{"threads", 256}, {"shared_bytes", 16384}}}}},
                      {"shared_bytes", 16384}};
  // As NVIDIA's driver 580 reported them on an H100 (bit 36 set in the local memory size).
  add_driver_statistics(
      r, {{"main",
           {{"Register Count", 72}, {"Binary Size", 9344}, {"Local Memory Size", 68719477520ULL}}},
          {"zero", {{"Register Count", 16}, {"Local Memory Size", 68719476736ULL}}}});
  EXPECT_EQ(r["kernels"]["main"]["registers"], 72);
  EXPECT_EQ(r["kernels"]["main"]["threads"], 256);
  EXPECT_EQ(r["kernels"]["main"]["driver_statistics"]["Binary Size"], 9344);
  EXPECT_EQ(r["kernels"]["zero"]["registers"], 16);
  EXPECT_EQ(r["max_registers"], 72);
  EXPECT_EQ(r["kernels"]["main"]["local_bytes"], 784);
  EXPECT_EQ(r["kernels"]["zero"]["local_bytes"], 0);
  EXPECT_EQ(r["max_local_bytes"], 784);
  // The compiler's own count stays; names the rules do not know are only kept.
  nlohmann::json cuda = {{"kernels", {{"k", {{"registers", 128}}}}}, {"max_registers", 128}};
  add_driver_statistics(cuda, {{"k", {{"Register Count", 96}}}, {"j", {{"VGPRs", 64}}}});
  EXPECT_EQ(cuda["kernels"]["k"]["registers"], 128);
  EXPECT_EQ(cuda["max_registers"], 128);
  EXPECT_FALSE(cuda["kernels"]["j"].contains("registers"));
  EXPECT_EQ(cuda["kernels"]["j"]["driver_statistics"]["VGPRs"], 64);
  nlohmann::json none = {{"shared_bytes", 0}};
  add_driver_statistics(none, nlohmann::json::object());
  EXPECT_EQ(none, (nlohmann::json{{"shared_bytes", 0}}));
}

TEST(DocumentedPeaks, H100Variants) {
  auto sxm = documented_peaks("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(sxm);
  EXPECT_DOUBLE_EQ(sxm->fp32_tflops, 66.9);
  EXPECT_DOUBLE_EQ(sxm->tf32_tflops, 494.7);
  EXPECT_DOUBLE_EQ(sxm->fp16_tflops, 989.4);
  EXPECT_DOUBLE_EQ(sxm->memory_gbs, 3350);
  EXPECT_EQ(sxm->source, "vendor datasheet");
  EXPECT_NE(sxm->device.find("H100"), std::string::npos);

  auto pcie = documented_peaks("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie);
  EXPECT_DOUBLE_EQ(pcie->fp32_tflops, 51.2);
  EXPECT_LT(pcie->memory_gbs, sxm->memory_gbs);

  auto named_sxm = documented_peaks("NVIDIA H100 SXM5 80GB");
  ASSERT_TRUE(named_sxm);
  EXPECT_DOUBLE_EQ(named_sxm->fp32_tflops, 66.9);
}

TEST(DocumentedPeaks, H200HasH100ComputeAndMoreBandwidth) {
  auto h200 = documented_peaks("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_DOUBLE_EQ(h200->fp32_tflops, 66.9);
  EXPECT_DOUBLE_EQ(h200->fp16_tflops, 989.4);
  EXPECT_DOUBLE_EQ(h200->memory_gbs, 4800);
  auto gh200 = documented_peaks("NVIDIA GH200 480GB");
  ASSERT_TRUE(gh200);
  EXPECT_NE(gh200->device.find("GH200"), std::string::npos);
}

// Dense FP8 on Hopper (1979 TFLOP/s on the SXM parts), none documented where the tensor cores
// have no fp8 (Ampere).
TEST(DocumentedPeaks, Fp8OnHopperAndNoneOnAmpere) {
  EXPECT_DOUBLE_EQ(documented_peaks("NVIDIA H100 80GB HBM3")->fp8_tflops, 1979);
  EXPECT_DOUBLE_EQ(documented_peaks("NVIDIA H200")->fp8_tflops, 1979);
  EXPECT_DOUBLE_EQ(documented_peaks("NVIDIA H100 PCIe")->fp8_tflops, 1513);
  EXPECT_DOUBLE_EQ(documented_peaks("NVIDIA A100-SXM4-80GB")->fp8_tflops, 0);
}

TEST(DocumentedPeaks, OtherDevices) {
  auto a100 = documented_peaks("NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->fp32_tflops, 19.5);
  EXPECT_DOUBLE_EQ(a100->tf32_tflops, 156);
  EXPECT_DOUBLE_EQ(a100->fp16_tflops, 312);
  EXPECT_DOUBLE_EQ(a100->memory_gbs, 2039);
  auto a100_40 = documented_peaks("NVIDIA A100-SXM4-40GB");
  ASSERT_TRUE(a100_40);
  EXPECT_LT(a100_40->memory_gbs, a100->memory_gbs);

  auto a6000 = documented_peaks("NVIDIA RTX A6000");
  ASSERT_TRUE(a6000);
  EXPECT_DOUBLE_EQ(a6000->fp32_tflops, 38.7);
  EXPECT_DOUBLE_EQ(a6000->fp16_tflops, 154.8);

  auto l40s = documented_peaks("NVIDIA L40S");
  ASSERT_TRUE(l40s);
  EXPECT_EQ(l40s->device, "NVIDIA L40S");
  auto l40 = documented_peaks("NVIDIA L40");
  ASSERT_TRUE(l40);
  EXPECT_EQ(l40->device, "NVIDIA L40");

  auto g4090 = documented_peaks("NVIDIA GeForce RTX 4090");
  ASSERT_TRUE(g4090);
  EXPECT_DOUBLE_EQ(g4090->fp32_tflops, 82.6);

  auto mi = documented_peaks("AMD Instinct MI250X");
  ASSERT_TRUE(mi);
  EXPECT_EQ(mi->device, "AMD Instinct MI250X");
  EXPECT_DOUBLE_EQ(mi->tf32_tflops, 0);
  auto mi250 = documented_peaks("AMD Instinct MI250");
  ASSERT_TRUE(mi250);
  EXPECT_EQ(mi250->device, "AMD Instinct MI250");

  auto adreno = documented_peaks("Qualcomm(R) Adreno(TM) X1-85 GPU");
  ASSERT_TRUE(adreno);
  EXPECT_DOUBLE_EQ(adreno->fp32_tflops, 4.6);
}

TEST(DocumentedPeaks, CaseInsensitiveAndUnknown) {
  auto h = documented_peaks("nvidia h100 pcie");
  ASSERT_TRUE(h);
  EXPECT_DOUBLE_EQ(h->fp32_tflops, 51.2);
  EXPECT_FALSE(documented_peaks("llvmpipe (LLVM 15.0.6, 256 bits)"));
  EXPECT_FALSE(documented_peaks(""));
}

}  // namespace
}  // namespace peak
