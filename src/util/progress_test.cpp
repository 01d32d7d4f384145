#include "util/progress.h"

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace peak {
namespace {

TEST(Progress, MirrorKeepsTheLatestLinesEvenWhenQuiet) {
  auto dir = make_temp_dir("peak-progress-test-");
  ASSERT_TRUE(dir) << dir.error();
  fs::path file = *dir / "status.json";
  FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  {
    Progress p(sink);
    p.set_quiet(true);
    p.mirror_to(file);
    p.print("step 2/3: tb-tiling");
    p.status("  validate 5/12 configurations");
    auto text = read_file(file);
    ASSERT_TRUE(text) << text.error();
    auto j = nlohmann::json::parse(*text);
    EXPECT_EQ(j["format"], 1);
    EXPECT_EQ(j["pid"], static_cast<int64_t>(::getpid()));
    EXPECT_EQ(j["line"], "step 2/3: tb-tiling");
    EXPECT_EQ(j["status"], "  validate 5/12 configurations");
    EXPECT_GT(j["updated_unix"].get<double>(), 0);
    p.print("step 3/3: thread-tiling");
    j = nlohmann::json::parse(*read_file(file));
    EXPECT_EQ(j["line"], "step 3/3: thread-tiling");
    EXPECT_EQ(j["status"], "");
  }
  std::fseek(sink, 0, SEEK_END);
  EXPECT_EQ(std::ftell(sink), 0) << "quiet: nothing printed";
  std::fclose(sink);
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

}  // namespace
}  // namespace peak
