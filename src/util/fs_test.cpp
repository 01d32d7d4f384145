// Writing files: every failure is reported, and links and device nodes are never renamed over.
#include "util/fs.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "util/output.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

class WriteFileTest : public testing::TempDirTest {
 protected:
  WriteFileTest() : TempDirTest("peak-fs-test-") {}
  // A character device like /dev/full (every write fails with ENOSPC) inside the test's folder;
  // false where this user or file system cannot make one.
  bool make_full_device(const fs::path& p) {
    return ::mknod(p.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) == 0;
  }
  const fs::path& dir = temp_dir();
};

TEST_F(WriteFileTest, AFullDeviceIsAnErrorEvenForAShortText) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  auto s = write_file("/dev/full", "short\n");
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("/dev/full"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.message();
}

TEST_F(WriteFileTest, WritesThroughASymbolicLink) {
  ASSERT_TRUE(write_file(dir / "real.txt", "old\n"));
  fs::create_symlink("real.txt", dir / "link.txt");
  ASSERT_TRUE(write_file(dir / "link.txt", "new\n"));
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(*read_file(dir / "real.txt"), "new\n");
}

TEST_F(WriteFileTest, AtomicWritesNeverReplaceALinkOrADeviceNode) {
  ASSERT_TRUE(write_file(dir / "real.txt", "old\n"));
  fs::create_symlink("real.txt", dir / "link.txt");
  auto s = write_file_atomic(dir / "link.txt", "new\n");
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(*read_file(dir / "real.txt"), "old\n");
  if (make_full_device(dir / "full")) {
    EXPECT_FALSE(write_file_atomic(dir / "full", "new\n"));
    EXPECT_TRUE(fs::is_character_file(dir / "full"));
  }
  // A regular file is replaced, and nothing is left beside it.
  ASSERT_TRUE(write_file_atomic(dir / "real.txt", "new\n"));
  EXPECT_EQ(*read_file(dir / "real.txt"), "new\n");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, fs::exists(dir / "full") ? 3u : 2u);
}

TEST_F(WriteFileTest, OutputFilesFollowLinksAndWriteToDevices) {
  // A link to a regular file: the file is replaced, the link stays.
  ASSERT_TRUE(write_file(dir / "real.txt", "old\n"));
  fs::create_symlink("real.txt", dir / "link.txt");
  ASSERT_TRUE(write_output_file(dir / "link.txt", "new\n"));
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(*read_file(dir / "real.txt"), "new\n");
  // A link to nothing yet: the file it names is created.
  fs::create_symlink("later.txt", dir / "dangling.txt");
  ASSERT_TRUE(write_output_file(dir / "dangling.txt", "made\n"));
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.txt"));
  EXPECT_EQ(*read_file(dir / "later.txt"), "made\n");
  // A new file and a folder.
  ASSERT_TRUE(write_output_file(dir / "sub" / "new.txt", "x"));
  EXPECT_EQ(*read_file(dir / "sub" / "new.txt"), "x");
  auto folder = write_output_file(dir / "sub", "x");
  EXPECT_FALSE(folder);
  EXPECT_NE(folder.message().find("is a folder"), std::string::npos) << folder.message();
  // A device that refuses the data: an error, and the device node stays.
  if (!make_full_device(dir / "full")) GTEST_SKIP() << "cannot make a device node here";
  auto s = write_output_file(dir / "full", "short\n");
  EXPECT_FALSE(s);
  EXPECT_TRUE(fs::is_character_file(dir / "full"));
  fs::create_symlink("full", dir / "full-link");
  EXPECT_FALSE(write_output_file(dir / "full-link", "short\n"));
  EXPECT_TRUE(fs::is_symlink(dir / "full-link"));
  EXPECT_TRUE(fs::is_character_file(dir / "full"));
}

}  // namespace
}  // namespace peak
