// The tuning cache format and the simulation runner that replays it.
#include "tune/cache.h"

#include <gtest/gtest.h>

#include "tune/simulation.h"
#include "tune/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using json = nlohmann::json;

TuningCache small_cache() {
  std::vector<SpaceParam> params = {{"X", {8, 16, 32}, 16}, {"Y", {1, 2}, 1}};
  TuningCache c = testing::synthetic_cache(
      params, [](const Config& k) { return k.at("X") == 32 ? -1.0 : 10.0 / k.at("X") + k.at("Y"); },
      "X * Y <= 32");
  c.device.max_threads_per_group = 256;
  c.shape = "M=64 N=64 K=64";
  c.work.flops = 2 * 64 * 64 * 64;
  c.command = "peak tune 4 --strategy exhaustive";
  CacheEntry pruned;
  pruned.config = {{"X", 32}, {"Y", 2}};
  pruned.disposition = Disposition::invalid_config;
  pruned.stage = Stage::validity;
  pruned.reason = "tuning_valid: `X * Y <= 32` is false (X=32 Y=2)";
  c.add(pruned);
  return c;
}

TEST(Cache, RoundTripsThroughJsonAndFiles) {
  TuningCache c = small_cache();
  auto d = make_temp_dir("peak-cache-test-");
  ASSERT_TRUE(d);
  fs::path file = *d / "space.json";
  ASSERT_TRUE(write_cache(file, c));
  auto back = read_cache(file);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->to_json(), c.to_json());
  EXPECT_EQ(back->entries().size(), 6u);
  EXPECT_EQ(back->params, c.params);
  EXPECT_EQ(back->device.max_threads_per_group, 256);
  EXPECT_EQ(back->work.flops, c.work.flops);
  EXPECT_EQ(back->best()->config, (Config{{"X", 16}, {"Y", 1}}));
  const CacheEntry* p = back->find({{"X", 32}, {"Y", 2}});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->stage, Stage::validity);
  EXPECT_EQ(p->reason, "tuning_valid: `X * Y <= 32` is false (X=32 Y=2)");
  json j = json::parse(*read_file(file));
  EXPECT_EQ(j["format"], "peak-tuning-cache");
  EXPECT_EQ(j["version"], kCacheFormatVersion);
  EXPECT_FALSE(j["configs"][0].contains("score_ms") && j["configs"][0]["disposition"] != "passed");
  std::error_code ec;
  fs::remove_all(*d, ec);
}

// A cache is a file the user names (peak export-space -o, peak tune --export-space): a link
// keeps pointing at the file it names, and a device that refuses the data is an error.
TEST(Cache, WritesThroughALinkAndReportsAFullDevice) {
  TuningCache c = small_cache();
  auto d = make_temp_dir("peak-cache-test-");
  ASSERT_TRUE(d);
  ASSERT_TRUE(write_file(*d / "real.json", "{}\n"));
  fs::create_symlink("real.json", *d / "space.json");
  ASSERT_TRUE(write_cache(*d / "space.json", c));
  EXPECT_TRUE(fs::is_symlink(*d / "space.json"));
  auto back = read_cache(*d / "real.json");
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->to_json(), c.to_json());
  if (fs::exists("/dev/full")) {
    fs::create_symlink("/dev/full", *d / "full.json");
    EXPECT_FALSE(write_cache(*d / "full.json", c));
    EXPECT_TRUE(fs::is_symlink(*d / "full.json"));
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  std::error_code ec;
  fs::remove_all(*d, ec);
}

TEST(Cache, RefusesOtherFormatsNewerVersionsAndBadEntries) {
  json good = small_cache().to_json();
  auto error_of = [](const json& j) {
    auto r = TuningCache::from_json(j, "x.json");
    return r ? std::string() : r.error();
  };
  EXPECT_EQ(error_of(good), "");
  json j = good;
  j["version"] = kCacheFormatVersion + 1;
  EXPECT_NE(error_of(j).find("written by a newer peak"), std::string::npos) << error_of(j);
  j = good;
  j["format"] = "something";
  EXPECT_NE(error_of(j).find("x.json: not a tuning cache"), std::string::npos);
  j = good;
  j.erase("version");
  EXPECT_NE(error_of(j).find("no integer \"version\""), std::string::npos);
  j = good;
  j["configs"][1]["disposition"] = "great";
  EXPECT_NE(error_of(j).find("configs[1]: unknown disposition 'great'"), std::string::npos);
  j = good;
  j["configs"][1]["stage"] = "later";
  EXPECT_NE(error_of(j).find("configs[1]: unknown stage 'later'"), std::string::npos);
  j = good;
  for (auto& e : j["configs"])
    if (e["disposition"] == "passed") e["score_ms"] = -1;
  EXPECT_NE(error_of(j).find("positive score_ms"), std::string::npos);
  j = good;
  j["space"].erase("parameters");
  EXPECT_NE(error_of(j).find("malformed tuning cache"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("not a tuning cache"), std::string::npos);
}

TEST(Simulation, ReplaysOutcomesWithASimulatedClock) {
  TuningCache c = small_cache();
  SimulationRunner sim(c, {2});
  std::vector<Config> batch = {
      {{"X", 8}, {"Y", 1}}, {{"X", 16}, {"Y", 2}}, {{"X", 32}, {"Y", 1}}, {{"X", 8}, {"Y", 7}}};
  auto out = sim.run(batch, nullptr);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].disposition, Disposition::passed);
  EXPECT_DOUBLE_EQ(out[0].score_ms, 10.0 / 8 + 1);
  EXPECT_EQ(out[1].stage, Stage::time);
  EXPECT_EQ(out[2].disposition, Disposition::incorrect);
  EXPECT_EQ(out[2].message, "outputs differ");
  EXPECT_EQ(out[3].disposition, Disposition::not_run);
  EXPECT_EQ(out[3].message, "not in the tuning cache");
  // Three compiles of 2 s on 2 workers: 4 s; validation 3 x 1 s; timing 2 x 0.5 s.
  EXPECT_DOUBLE_EQ(sim.elapsed_seconds(), 4 + 3 + 1);
  sim.run({{{"X", 8}, {"Y", 2}}}, nullptr);
  EXPECT_DOUBLE_EQ(sim.elapsed_seconds(), 8 + 2 + 1 + 0.5);
}

TEST(Simulation, AppliesThePruningRulesToRecordedResources) {
  TuningCache c = small_cache();
  CacheEntry e = *c.find({{"X", 8}, {"Y", 1}});
  e.resources = {{"threads", 512}, {"shared_bytes", 0}};  // over the device's 256
  c.add(e);
  SimulationRunner sim(c, {1});
  auto out = sim.run({e.config}, nullptr);
  EXPECT_EQ(out[0].disposition, Disposition::invalid_config);
  EXPECT_EQ(out[0].stage, Stage::resources);
  EXPECT_TRUE(out[0].pruned());
  EXPECT_EQ(out[0].message, "512 threads per group exceed the device's limit of 256");
  EXPECT_DOUBLE_EQ(sim.elapsed_seconds(), 2);  // compiled, then discarded
}

}  // namespace
}  // namespace peak
