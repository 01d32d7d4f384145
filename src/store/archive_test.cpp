#include "store/archive.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "store/store.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {
namespace fs = std::filesystem;

class StoreArchive : public testing::TempDirTest {
 protected:
  StoreArchive() : TempDirTest("peak-store-archive-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    ::setenv("PEAK_CACHE_DIR", (dir_ / "cache").c_str(), 1);
    // A store folder as results/ keeps them: FORMAT, blobs/, peak.db.
    auto s = Store::open(dir_ / "run" / "store", /*create=*/true);
    ASSERT_TRUE(s) << s.error();
    auto h = (*s)->put_blob("the kernel's source");
    ASSERT_TRUE(h) << h.error();
    blob_ = *h;
  }
  void TearDown() override {
    ::unsetenv("PEAK_CACHE_DIR");
    TempDirTest::TearDown();
  }
  void run(const std::vector<std::string>& argv) {
    ProcessOptions po;
    po.argv = argv;
    auto r = run_process(po);
    ASSERT_TRUE(r && r->ok()) << (r ? r->err : r.error());
  }

  const fs::path& dir_ = temp_dir();
  std::string blob_;
};

TEST(StoreArchiveNames, OnlyStoreArchivesAreNamedAsSuch) {
  EXPECT_TRUE(is_store_archive("results/x/store.tar.xz"));
  EXPECT_TRUE(is_store_archive("results/x/hip-store.tar.xz"));
  EXPECT_TRUE(is_store_archive("results/x/demo-peak.db.xz"));
  EXPECT_FALSE(is_store_archive("results/x/workspace.tar.xz"));  // a workspace, not a store
  EXPECT_FALSE(is_store_archive("results/x/suite.json.xz"));
  EXPECT_FALSE(is_store_archive("results/x/store"));
}

// A packed store reads as the folder did: its database and its blobs, from the archive's path
// or from the folder's (which no longer exists); unpacked once, keyed by content.
TEST_F(StoreArchive, APackedStoreReadsAsItsFolder) {
  const fs::path folder = dir_ / "run" / "store";
  run({"tar", "-C", folder.string(), "-cJf", (dir_ / "run" / "store.tar.xz").string(), "FORMAT",
       "blobs", "peak.db"});
  fs::remove_all(folder);
  EXPECT_EQ(store_or_archive(folder), dir_ / "run" / "store.tar.xz");
  EXPECT_EQ(store_or_archive(folder / "peak.db"), dir_ / "run" / "store.tar.xz");
  EXPECT_EQ(store_or_archive(dir_ / "elsewhere"), dir_ / "elsewhere");  // nothing to find
  fs::create_directories(folder / "blobs");  // a store's folder left behind, empty of a store
  EXPECT_EQ(store_or_archive(folder), dir_ / "run" / "store.tar.xz");
  EXPECT_EQ(store_or_archive(dir_ / "run"), dir_ / "run");  // a folder of results stays itself
  fs::remove_all(folder);
  auto a = unpack_store_archive(store_or_archive(folder));
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->parent_path(), dir_ / "cache" / "stores");
  auto s = Store::open_read_only(*a);
  ASSERT_TRUE(s) << s.error();
  EXPECT_TRUE((*s)->has_blobs());
  auto text = (*s)->get_blob(blob_);
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, "the kernel's source");
  // The second read finds it unpacked; nothing half-written is left beside it.
  auto b = unpack_store_archive(dir_ / "run" / "store.tar.xz");
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(*a, *b);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ / "cache" / "stores"))
    ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST_F(StoreArchive, ALoneDatabaseUnpacksWithoutBlobs) {
  run({"xz", "-k", (dir_ / "run" / "store" / "peak.db").string()});
  fs::path db = dir_ / "run" / "store" / "peak.db.xz";
  ASSERT_TRUE(fs::exists(db));
  auto a = unpack_store_archive(db);
  ASSERT_TRUE(a) << a.error();
  auto s = Store::open_read_only(*a);
  ASSERT_TRUE(s) << s.error();
  EXPECT_FALSE((*s)->has_blobs());
}

TEST_F(StoreArchive, AnArchiveWithoutADatabaseIsNoStore) {
  ASSERT_TRUE(write_file(dir_ / "x" / "notes.txt", "not a store"));
  run({"tar", "-C", (dir_ / "x").string(), "-cJf", (dir_ / "x-store.tar.xz").string(),
       "notes.txt"});
  auto a = unpack_store_archive(dir_ / "x-store.tar.xz");
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().find("holds no peak.db at its top level"), std::string::npos) << a.error();
  // Nothing is left in the cache that a later read could take for the store.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ / "cache" / "stores"))
    ++entries;
  EXPECT_EQ(entries, 0u);
}

}  // namespace
}  // namespace peak
