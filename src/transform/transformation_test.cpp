#include "transform/transformation.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

const char* kFull = R"MD(+++
format = 1
name = "tb-tiling"
version = 2
title = "Thread-block tiling"
backends = ["hlsl", "cuda"]

[[tuning]]
name = "TILE_K"
values = [8, 16, 32]
default = 16

[[tuning]]
name = "PAD"
values = [0, 1]

[translations.hlsl]
"shared memory" = "groupshared"
"barrier" = "GroupMemoryBarrierWithGroupSync()"

[translations.cuda]
"shared memory" = "__shared__"

[devices."H100"]
note = "Use at most 48 KiB."

[[helpers]]
name = "copy-tile"
region = "device"
backend = "cuda"
code = "void copy_tile() {}"
+++
Tile the kernel.

Second paragraph.

```
## Pass 9: this is inside a fence, not a heading
```

## Pass 1: macros
Define the macros.

## Pass 2: device
Tile the loop.
### A sub-heading stays in the pass

## Pass 3: host
Fix the grid.
)MD";

TEST(Transformation, ParsesEveryField) {
  auto r = parse_transformation(kFull, "tb.md");
  ASSERT_TRUE(r.is_ok()) << r.error();
  const Transformation& t = *r;
  EXPECT_EQ(t.format, 1);
  EXPECT_EQ(t.name, "tb-tiling");
  EXPECT_EQ(t.version, 2);
  EXPECT_EQ(t.title, "Thread-block tiling");
  EXPECT_EQ(t.backends, (std::vector<std::string>{"hlsl", "cuda"}));
  EXPECT_TRUE(t.supports("cuda"));
  EXPECT_FALSE(t.supports("hip"));
  ASSERT_EQ(t.tuning.size(), 2u);
  EXPECT_EQ(t.tuning[0].name, "TILE_K");
  EXPECT_EQ(t.tuning[0].values, (std::vector<int64_t>{8, 16, 32}));
  EXPECT_EQ(t.tuning[0].default_value, 16);
  EXPECT_EQ(t.tuning[1].default_value, 0);  // the first value when no default is given
  EXPECT_EQ(t.translations.at("hlsl").at("shared memory"), "groupshared");
  EXPECT_EQ(t.translations.at("hlsl").at("barrier"), "GroupMemoryBarrierWithGroupSync()");
  EXPECT_EQ(t.translations.at("cuda").at("shared memory"), "__shared__");
  EXPECT_EQ(t.device_notes.at("H100"), "Use at most 48 KiB.");
  ASSERT_EQ(t.helpers.size(), 1u);
  EXPECT_EQ(t.helpers[0].name, "copy-tile");
  EXPECT_EQ(t.helpers[0].region, Region::device);
  EXPECT_EQ(t.helpers[0].backend, "cuda");
  EXPECT_EQ(t.helpers[0].code, "void copy_tile() {}");
  EXPECT_EQ(t.description,
            "Tile the kernel.\n\nSecond paragraph.\n\n```\n## Pass 9: this is inside a fence, not "
            "a heading\n```");
  ASSERT_EQ(t.passes.size(), 3u);
  EXPECT_EQ(t.passes[0].index, 1);
  EXPECT_EQ(t.passes[0].region, Region::macros);
  EXPECT_EQ(t.passes[0].instruction, "Define the macros.");
  EXPECT_EQ(t.passes[1].region, Region::device);
  EXPECT_EQ(t.passes[1].instruction, "Tile the loop.\n### A sub-heading stays in the pass");
  EXPECT_EQ(t.passes[2].region, Region::host);
  EXPECT_EQ(t.passes[2].instruction, "Fix the grid.");
}

TEST(Transformation, TuningValidIsAnExpression) {
  auto r = parse_transformation(
      "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\n"
      "tuning_valid = \" TRD_X_DIM % CHUNK == 0 \"\n+++\n## Pass 1: device\nDo.\n",
      "x.md");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->tuning_valid, "TRD_X_DIM % CHUNK == 0");
  auto bad = parse_transformation(
      "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\ntuning_valid = \"A %% 2\"\n+++\n"
      "## Pass 1: device\nDo.\n",
      "x.md");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().find("x.md:5: cannot parse tuning_valid"), std::string::npos)
      << bad.error();
}

TEST(Transformation, TransformedContextJoinsTuningConstraintAndWorkspace) {
  KernelContext ctx;
  ctx.tuning = {{"TILE_K", {8, 16}, 8}};
  ctx.tuning_valid = "TILE_K <= 16 || TILE_K == 32";
  Transformation t;
  t.tuning = {{"TILE_K", {32}, 32}, {"CHUNK", {4, 8}, 4}};
  t.tuning_valid = "TILE_K % CHUNK == 0";
  t.workspace = "16 * M * N";
  KernelContext out = transformed_context(t, ctx);
  ASSERT_EQ(out.tuning.size(), 2u);
  EXPECT_EQ(out.tuning[0].values, (std::vector<int64_t>{8, 16}));  // the context's set stays
  EXPECT_EQ(out.tuning[1].name, "CHUNK");
  EXPECT_EQ(out.tuning_valid, "(TILE_K <= 16 || TILE_K == 32) && TILE_K % CHUNK == 0");
  EXPECT_EQ(out.workspace, "16 * M * N");
  // Applied again (a second application of the same transformation): nothing is repeated.
  KernelContext again = transformed_context(t, out);
  EXPECT_EQ(again.tuning_valid, out.tuning_valid);
  EXPECT_EQ(again.workspace, "16 * M * N");
  EXPECT_EQ(again.tuning.size(), 2u);
}

TEST(Transformation, RetiredParametersKeepTheirDefault) {
  auto t = parse_transformation(
      "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\nretires = [\"BLOCK_X\", \"GONE\"]\n"
      "+++\n## Pass 1: macros\nDo it.\n",
      "x.md");
  ASSERT_TRUE(t.is_ok()) << t.error();
  EXPECT_EQ(t->retires, (std::vector<std::string>{"BLOCK_X", "GONE"}));
  KernelContext ctx;
  ctx.tuning = {{"BLOCK_X", {8, 16, 32}, 16}, {"BLOCK_Y", {8, 16}, 8}};
  KernelContext out = transformed_context(*t, ctx);
  EXPECT_EQ(out.tuning[0].values, (std::vector<int64_t>{16}));  // its default, alone
  EXPECT_EQ(out.tuning[1].values, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(out.tuning.size(), 2u);  // a name the context lacks is ignored

  // `valid` of a transformation narrows the shapes the kernel supports, not the problem's.
  Transformation tma;
  tma.valid = "K % 8 == 0";
  ctx.valid = "K > 0";
  KernelContext narrowed = transformed_context(tma, ctx);
  EXPECT_EQ(narrowed.valid, "K > 0");
  EXPECT_EQ(narrowed.supports, "K % 8 == 0");
  EXPECT_EQ(transformed_context(tma, narrowed).supports, "K % 8 == 0");  // not repeated

  // `lifts` takes such a condition out again, alone or as an operand of the `&&` it joined.
  auto pad = parse_transformation(
      "+++\nformat = 2\nname = \"pad\"\ntitle = \"P\"\nlifts = \" K % 8 == 0 \"\n"
      "+++\n## Pass 1: device\nDo it.\n",
      "pad.md");
  ASSERT_TRUE(pad.is_ok()) << pad.error();
  EXPECT_EQ(pad->lifts, "K % 8 == 0");
  EXPECT_EQ(transformed_context(*pad, narrowed).supports, "");
  EXPECT_EQ(transformed_context(*pad, narrowed).valid, "K > 0");
  Transformation rows;
  rows.valid = "M % 2 == 0";
  KernelContext both = transformed_context(rows, narrowed);
  EXPECT_EQ(both.supports, "(K % 8 == 0) && (M % 2 == 0)");
  EXPECT_EQ(transformed_context(*pad, both).supports, "(M % 2 == 0)");
  EXPECT_EQ(transformed_context(*pad, transformed_context(tma, both)).supports, "(M % 2 == 0)");
  EXPECT_EQ(transformed_context(*pad, ctx).supports, "");  // nothing to lift

  auto bad = parse_transformation(
      "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\nretires = [\"not a name\"]\n"
      "+++\n## Pass 1: macros\nDo it.\n",
      "x.md");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().find("'retires' must list tuning parameter names"), std::string::npos)
      << bad.error();
}

TEST(Transformation, EmptyBackendsMeansAll) {
  auto r = parse_transformation(
      "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\n+++\n## Pass 1: device\nDo.\n", "x.md");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_TRUE(r->supports("hlsl"));
  EXPECT_TRUE(r->supports("cuda"));
  EXPECT_EQ(r->version, 1);
  EXPECT_EQ(r->description, "");
}

TEST(Transformation, CrlfFilesParse) {
  std::string text = replace_all(kFull, "\n", "\r\n");
  auto r = parse_transformation(text, "tb.md");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->passes[0].instruction, "Define the macros.");
  EXPECT_EQ(r->passes.size(), 3u);
}

std::string front(const std::string& extra, const std::string& body = "## Pass 1: device\nDo.\n") {
  return "+++\nformat = 1\nname = \"x\"\ntitle = \"X\"\n" + extra + "+++\n" + body;
}

TEST(Transformation, RequiresNamesACudaArchitecture) {
  for (const char* arch : {"sm_80", "sm_90", "sm_90a", "sm_100a"}) {
    auto r = parse_transformation(front(fmt::format("requires = \"{}\"\n", arch)), "x.md");
    ASSERT_TRUE(r.is_ok()) << r.error();
    EXPECT_EQ(r->required_arch, arch);
  }
  auto none = parse_transformation(front(""), "x.md");
  ASSERT_TRUE(none.is_ok()) << none.error();
  EXPECT_EQ(none->required_arch, "");
  for (const char* bad : {"sm90", "sm_9", "sm_90b", "gfx90a", "SM_90", "sm_90a "}) {
    auto r = parse_transformation(front(fmt::format("requires = \"{}\"\n", bad)), "x.md");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(
        r.error().find(fmt::format("x.md:5: requires = \"{}\" is not a device architecture", bad)),
        std::string::npos)
        << r.error();
  }
  auto number = parse_transformation(front("requires = 90\n"), "x.md");
  ASSERT_FALSE(number.is_ok());
  EXPECT_NE(number.error().find("x.md:5: 'requires' must be a string"), std::string::npos)
      << number.error();
}

TEST(Transformation, ArchMeetsTheRequirement) {
  EXPECT_TRUE(arch_meets("sm_90a", "sm_90"));
  EXPECT_TRUE(arch_meets("sm_90a", "sm_90a"));
  EXPECT_TRUE(arch_meets("sm_90", "sm_90"));
  EXPECT_FALSE(arch_meets("sm_90", "sm_90a"));
  EXPECT_TRUE(arch_meets("sm_90a", "sm_80"));
  EXPECT_TRUE(arch_meets("sm_100", "sm_90"));
  EXPECT_FALSE(arch_meets("sm_86", "sm_90"));
  EXPECT_FALSE(arch_meets("sm_86", "sm_90a"));
  EXPECT_FALSE(arch_meets("sm_100a", "sm_90a"));  // no wgmma on Blackwell
  EXPECT_TRUE(arch_meets("sm_100a", "sm_100a"));
  EXPECT_TRUE(arch_meets("", ""));
  EXPECT_FALSE(arch_meets("gfx90a", "sm_80"));
}

TEST(Transformation, RequirementProblemNamesTheDeviceAndTheWayOut) {
  Transformation t;
  t.name = "wgmma";
  EXPECT_EQ(requirement_problem(t, "hlsl", "llvmpipe", ""), "");  // no `requires`
  t.required_arch = "sm_90a";
  EXPECT_EQ(requirement_problem(t, "cuda", "NVIDIA H100 80GB HBM3", "sm_90a"), "");
  EXPECT_EQ(requirement_problem(t, "cuda", "NVIDIA RTX A6000", ""), "");  // unknown: not refused
  EXPECT_EQ(requirement_problem(t, "cuda", "NVIDIA RTX A6000", "sm_86"),
            "transformation wgmma requires sm_90a (a Hopper GPU, compute capability 9.0, with its "
            "architecture-specific instructions such as wgmma and setmaxnreg); the device is "
            "NVIDIA RTX A6000 (sm_86): choose another sequence or run on a device that has it");
  // HIP kernels run on NVIDIA through the mapping header: that device's architecture decides.
  EXPECT_EQ(requirement_problem(t, "hip", "NVIDIA H100 80GB HBM3", "sm_90a"), "");
  EXPECT_NE(requirement_problem(t, "hip", "NVIDIA RTX A6000", "sm_86").find("the device is"),
            std::string::npos);
  std::string hlsl = requirement_problem(t, "hlsl", "NVIDIA H100 80GB HBM3", "sm_90a");
  EXPECT_NE(
      hlsl.find("applies only to kernels of the cuda and hip backends; this kernel's backend is "
                "hlsl"),
      std::string::npos)
      << hlsl;
  t.required_arch = "sm_80";
  EXPECT_NE(requirement_problem(t, "cuda", "Tesla V100", "sm_70")
                .find("requires sm_80 (compute capability 8.0 or newer); the device is Tesla "
                      "V100 (sm_70)"),
            std::string::npos);
}

TEST(Transformation, FamiliesSayWhichKernelsItIsWrittenFor) {
  auto any = parse_transformation(front(""), "x.md");
  ASSERT_TRUE(any) << any.error();
  EXPECT_TRUE(any->families.empty()) << "format 1 files are read as written for any family";
  for (const char* f : {"matmul", "softmax", ""}) EXPECT_TRUE(any->suits_family(f)) << f;
  EXPECT_EQ(families_text(*any), "any family");

  auto rows = parse_transformation(
      "+++\nformat = 2\nname = \"warp-reduce\"\ntitle = \"X\"\nfamilies = [\"softmax\", "
      "\"rmsnorm\"]\n+++\n## Pass 1: device\nDo.\n",
      "x.md");
  ASSERT_TRUE(rows) << rows.error();
  EXPECT_EQ(rows->families, (std::vector<std::string>{"softmax", "rmsnorm"}));
  EXPECT_TRUE(rows->suits_family("rmsnorm"));
  EXPECT_FALSE(rows->suits_family("matmul"));
  EXPECT_FALSE(rows->suits_family("")) << "the generic family sees only those naming none";
  EXPECT_EQ(family_problem(*rows, "softmax"), "");
  EXPECT_EQ(family_problem(*rows, "matmul"),
            "warp-reduce is written for the softmax and rmsnorm families; this context is matmul "
            "(transformations list shows the ones for it; --all shows every one)");
  EXPECT_NE(family_problem(*rows, "").find("this context is of no family (generic)"),
            std::string::npos);

  Sequence seq;
  seq.steps = {{}, {}, {}};
  seq.steps[0].transformation = "x";
  seq.steps[1].transformation = "no-such-one";
  seq.steps[2].transformation = "warp-reduce";
  const std::vector<Transformation> lib = {*any, *rows};
  EXPECT_EQ(sequence_family_problem(seq, lib, "softmax"), "");
  EXPECT_EQ(sequence_family_problem(seq, lib, "matmul")
                .rfind("step 3 (warp-reduce): warp-reduce "
                       "is written for",
                       0),
            0u);
}

struct BadCase {
  std::string text;
  std::string expected;  // a substring of the error
};

TEST(Transformation, ErrorsNameFileLineAndWhatWasExpected) {
  const std::vector<BadCase> cases = {
      {"no front matter\n", "x.md:1: expected '+++'"},
      {"+++\nformat = 1\n", "x.md:2: the front matter opened on line 1 is never closed"},
      {"+++\nformat = 1\nname = = 3\n+++\n", "x.md:3:"},
      {front("colour = \"red\"\n"), "x.md:5: unknown key 'colour' in the front matter"},
      {"+++\nformat = 3\nname = \"x\"\ntitle = \"X\"\n+++\n## Pass 1: device\nDo.\n",
       "x.md:2: transformation format 3 is newer than this peak supports (format 2)"},
      {front("families = [\"matmul\"]\n"),
       "x.md:5: 'families' needs transformation format 2; write 'format = 2'"},
      {"+++\nformat = 2\nname = \"x\"\ntitle = \"X\"\nfamilies = []\n+++\n## Pass 1: device\nDo.\n",
       "x.md:5: 'families' must be a non-empty array"},
      {"+++\nformat = 2\nname = \"x\"\ntitle = \"X\"\nfamilies = [\"softmax\", \"softmax\"]\n+++\n"
       "## Pass 1: device\nDo.\n",
       "x.md:5: family 'softmax' appears twice"},
      {"+++\nname = \"x\"\ntitle = \"X\"\n+++\n", "missing key 'format'"},
      {"+++\nformat = 1\ntitle = \"X\"\n+++\n", "x.md:1: missing key 'name'"},
      {"+++\nformat = 1\nname = \"Tb_Tiling\"\ntitle = \"X\"\n+++\n",
       "x.md:3: name 'Tb_Tiling' must be kebab-case"},
      {front("requires = \"sm90a\"\n"),
       "x.md:5: requires = \"sm90a\" is not a device architecture; expected a CUDA architecture"},
      {front("backends = [\"metal\"]\n"),
       "x.md:5: unknown backend 'metal'; expected one of: cuda, hip, hlsl"},
      {front("[[tuning]]\nname = \"T\"\nvalues = [1, 2]\ndefault = 3\n"),
       "x.md:8: default 3 of 'T' is not one of its values"},
      {front("[[tuning]]\nname = \"T\"\nvalues = []\n"), "x.md:7: 'values' is empty"},
      {front("[[tuning]]\nname = \"T\"\nvalues = [1, 1]\n"), "x.md:7: value 1 appears twice"},
      {front("[[tuning]]\nname = \"9T\"\nvalues = [1]\n"), "must be a preprocessor identifier"},
      {front("[translations.cuda]\n\"barrier\" = 3\n"),
       "x.md:6: translation of 'barrier' must be a string"},
      {front("[devices.\"H100\"]\ntext = \"x\"\n"),
       "x.md:6: unknown key 'text' in devices.\"H100\""},
      {front("[[helpers]]\nname = \"h\"\nregion = \"kernel\"\ncode = \"\"\n"),
       "x.md:7: unknown region 'kernel'; expected macros, device or host"},
      {front("[[helpers]]\nname = \"h\"\nfrom = \"tma-loads\"\ncode = \"x\"\n"),
       "x.md:8: helper 'h' comes from transformation 'tma-loads', which gives its code; remove "
       "'code'"},
      {front("", "Only a description.\n"), "x.md:6: no pass found"},
      {front("", "## Pass 2: device\nDo.\n"), "x.md:6: pass 2 out of order"},
      {front("", "## Pass 1: device\nDo.\n## Pass 3: host\nDo.\n"),
       "x.md:8: pass 3 out of order; passes are numbered 1, 2, 3, ... and this one must be '## "
       "Pass 2: REGION'"},
      {front("", "## Pass 1: kernel\nDo.\n"), "x.md:6: unknown region 'kernel' in pass heading"},
      {front("", "## Pass one: device\nDo.\n"),
       "x.md:6: malformed pass heading '## Pass one: device'"},
      {front("", "## Pass 1 device\nDo.\n"), "x.md:6: malformed pass heading"},
      {front("", "## Pass 1: device\n\n## Pass 2: host\nDo.\n"),
       "x.md:6: pass 1 has no instruction text"},
      {front("", "## Pass 1: device\n```\ncode\n"), "a code fence '```' is never closed"},
  };
  for (const auto& c : cases) {
    auto r = parse_transformation(c.text, "x.md");
    ASSERT_FALSE(r.is_ok()) << "accepted:\n" << c.text;
    EXPECT_NE(r.error().find(c.expected), std::string::npos)
        << "error: " << r.error() << "\nexpected to contain: " << c.expected;
  }
}

class TempDir : public testing::TempDirTest {
 protected:
  TempDir() : TempDirTest("peak-transform-test-") {}
  void put(const std::string& rel, const std::string& text) {
    ASSERT_TRUE(write_file(dir_ / rel, text).is_ok());
  }
  static std::string named(const std::string& name) {
    return "+++\nformat = 1\nname = \"" + name + "\"\ntitle = \"T\"\n+++\n## Pass 1: device\nDo.\n";
  }
  const std::filesystem::path& dir_ = temp_dir();
};

using Library = TempDir;

TEST_F(Library, LoadsRecursivelySortedByName) {
  put("b/zeta.md", named("zeta"));
  put("a/alpha.md", named("alpha"));
  put("mid.md", named("mid"));
  put("README.md", "# Not a transformation\n");
  put("notes.txt", "ignored");
  auto lib = load_library(dir_);
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  ASSERT_EQ(lib->size(), 3u);
  EXPECT_EQ((*lib)[0].name, "alpha");
  EXPECT_EQ((*lib)[1].name, "mid");
  EXPECT_EQ((*lib)[2].name, "zeta");
  EXPECT_EQ((*lib)[0].path, dir_ / "a/alpha.md");
}

TEST_F(Library, DuplicateNamesNameBothFiles) {
  put("a/one.md", named("same"));
  put("b/two.md", named("same"));
  auto lib = load_library(dir_);
  ASSERT_FALSE(lib.is_ok());
  EXPECT_NE(lib.error().find((dir_ / "a/one.md").string()), std::string::npos) << lib.error();
  EXPECT_NE(lib.error().find((dir_ / "b/two.md").string()), std::string::npos) << lib.error();
  EXPECT_NE(lib.error().find("'same'"), std::string::npos) << lib.error();
}

TEST_F(Library, BadFileIsReportedWithItsPath) {
  put("ok.md", named("ok"));
  put("bad.md", "+++\nformat = 1\nname = \"bad\"\ntitle = \"T\"\n+++\n## Pass 1: gpu\nDo.\n");
  auto lib = load_library(dir_);
  ASSERT_FALSE(lib.is_ok());
  EXPECT_NE(lib.error().find((dir_ / "bad.md").string() + ":6: unknown region 'gpu'"),
            std::string::npos)
      << lib.error();
}

TEST_F(Library, WithProblemsABadFileIsSkippedAndNamed) {
  put("ok.md", named("ok"));
  put("bad.md", "+++\nformat = 1\nname = \"bad\"\ntitle = \"T\"\n+++\n## Pass 1: gpu\nDo.\n");
  std::vector<std::string> problems;
  auto lib = load_library(dir_, &problems);
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  ASSERT_EQ(lib->size(), 1u);
  EXPECT_EQ((*lib)[0].name, "ok");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find((dir_ / "bad.md").string() + ":6:"), std::string::npos) << problems[0];
}

std::string with_helper(const std::string& name, const std::string& helper) {
  return "+++\nformat = 2\nname = \"" + name + "\"\ntitle = \"T\"\n" + helper +
         "+++\n## Pass 1: device\nDo.\n";
}

TEST_F(Library, ABorrowedHelperIsTheSourcesOwn) {
  put("a/copy.md", with_helper("copy",
                               "[[helpers]]\nname = \"tile\"\nregion = \"device\"\n"
                               "backend = \"cuda\"\ncode = \"void copy_tile() {}\"\n"));
  put("b/use.md", with_helper("use", "[[helpers]]\nname = \"tile\"\nfrom = \"copy\"\n"));
  auto lib = load_library(dir_);
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  auto use = find_transformation(*lib, "use");
  ASSERT_TRUE(use.is_ok());
  ASSERT_EQ(use->helpers.size(), 1u);
  EXPECT_EQ(use->helpers[0].from, "copy");
  EXPECT_EQ(use->helpers[0].region, Region::device);
  EXPECT_EQ(use->helpers[0].backend, "cuda");
  EXPECT_EQ(use->helpers[0].code, "void copy_tile() {}");
}

TEST_F(Library, AHelperBorrowedFromTheOuterLibraryResolves) {
  put("own/use.md", with_helper("use", "[[helpers]]\nname = \"tile\"\nfrom = \"copy\"\n"));
  auto shared = parse_transformation(
      with_helper("copy", "[[helpers]]\nname = \"tile\"\nregion = \"macros\"\ncode = \"X\"\n"),
      "copy.md");
  ASSERT_TRUE(shared.is_ok()) << shared.error();
  const std::vector<Transformation> outer = {*shared};
  auto lib = load_library(dir_ / "own", nullptr, &outer);
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  EXPECT_EQ((*lib)[0].helpers[0].region, Region::macros);
  EXPECT_EQ((*lib)[0].helpers[0].code, "X");
  // Alone, the same folder cannot resolve it.
  auto alone = load_library(dir_ / "own");
  ASSERT_FALSE(alone.is_ok());
  EXPECT_NE(alone.error().find("helper 'tile' comes from transformation 'copy', which is not in "
                               "the library"),
            std::string::npos)
      << alone.error();
}

TEST_F(Library, UnresolvableBorrowedHelpersAreNamedAndSkipped) {
  put("copy.md", with_helper("copy",
                             "[[helpers]]\nname = \"tile\"\nregion = \"device\"\n"
                             "code = \"T\"\n"));
  put("chain.md", with_helper("chain", "[[helpers]]\nname = \"tile\"\nfrom = \"copy\"\n"));
  put("other.md", with_helper("other", "[[helpers]]\nname = \"load\"\nfrom = \"copy\"\n"));
  put("deep.md", with_helper("deep", "[[helpers]]\nname = \"tile\"\nfrom = \"chain\"\n"));
  std::vector<std::string> problems;
  auto lib = load_library(dir_, &problems);
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  ASSERT_EQ(lib->size(), 2u);  // copy and chain
  ASSERT_EQ(problems.size(), 2u);
  const std::string all = problems[0] + "\n" + problems[1];
  EXPECT_NE(all.find("transformation 'copy' does not define a helper 'load' of its own"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("'chain' does not define a helper 'tile' of its own (it borrows it from "
                     "'copy')"),
            std::string::npos)
      << all;
}

TEST_F(Library, MissingDirectoryIsAnError) {
  auto lib = load_library(dir_ / "nope");
  ASSERT_FALSE(lib.is_ok());
  EXPECT_NE(lib.error().find("is not a directory"), std::string::npos);
}

std::vector<Transformation> names_only(std::initializer_list<const char*> names) {
  std::vector<Transformation> out;
  for (const char* n : names) {
    Transformation t;
    t.name = n;
    out.push_back(t);
  }
  return out;
}

TEST(FindTransformation, ExactAndSuggestions) {
  auto lib = names_only({"refactor", "tb-tiling", "thread-tiling", "split-k"});
  auto ok = find_transformation(lib, "split-k");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok->name, "split-k");

  auto typo = find_transformation(lib, "tb-tilling");
  ASSERT_FALSE(typo.is_ok());
  EXPECT_EQ(typo.error(),
            "unknown transformation 'tb-tilling'; did you mean 'tb-tiling'? `peak transformations "
            "list` shows all");

  auto part = find_transformation(lib, "tiling");
  ASSERT_FALSE(part.is_ok());
  EXPECT_NE(part.error().find("did you mean 'tb-tiling' or 'thread-tiling'?"), std::string::npos)
      << part.error();

  auto far = find_transformation(lib, "vectorize-everything");
  ASSERT_FALSE(far.is_ok());
  EXPECT_EQ(far.error(),
            "unknown transformation 'vectorize-everything'; `peak transformations list` shows all");
}

TEST(Sequence, ParsesEveryField) {
  const char* text = R"MD(format = 1
name = "cuda-fp32"
description = "three steps"
attempts = 4

[[step]]
transformation = "refactor"

[[step]]
transformation = "tb-tiling"
attempts = 2
instructions = "Keep it simple."
strategy = "exhaustive"
strategy_budget = "50%,600s"
[step.tuning]
TILE_K = [16, 32]
)MD";
  auto s = parse_sequence(text, "s.toml");
  ASSERT_TRUE(s.is_ok()) << s.error();
  EXPECT_EQ(s->name, "cuda-fp32");
  EXPECT_EQ(s->description, "three steps");
  EXPECT_EQ(s->attempts, 4);
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_EQ(s->steps[0].transformation, "refactor");
  EXPECT_EQ(s->steps[0].attempts, 0);
  EXPECT_TRUE(s->steps[0].tuning.empty());
  EXPECT_EQ(s->steps[1].attempts, 2);
  EXPECT_EQ(s->steps[1].instructions, "Keep it simple.");
  EXPECT_EQ(s->steps[1].tuning.at("TILE_K"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(s->steps[0].strategy, "");
  EXPECT_EQ(s->steps[1].strategy, "exhaustive");
  EXPECT_EQ(s->steps[1].strategy_budget, "50%,600s");
}

TEST(Sequence, Format2KeepAndBudget) {
  const char* text = R"MD(format = 2
name = "cuda-fp32"
budget = 24

[tuning]
TRD_Y_DIM = [4, 8, 16]

[[step]]
transformation = "split-k"
keep = false
budget = 12

[[step]]
transformation = "pipelining"
)MD";
  auto s = parse_sequence(text, "s.toml");
  ASSERT_TRUE(s.is_ok()) << s.error();
  EXPECT_EQ(s->format, 2);
  EXPECT_EQ(s->budget, 24);
  EXPECT_EQ(s->tuning.at("TRD_Y_DIM"), (std::vector<int64_t>{4, 8, 16}));
  ASSERT_EQ(s->steps.size(), 2u);
  EXPECT_FALSE(s->steps[0].keep);
  EXPECT_EQ(s->steps[0].budget, 12);
  EXPECT_TRUE(s->steps[1].keep);
  EXPECT_EQ(s->steps[1].budget, 0);
  // Format 1 files still read, with every step kept and no budget of their own.
  auto old =
      parse_sequence("format = 1\nname = \"s\"\n[[step]]\ntransformation = \"a\"\n", "s.toml");
  ASSERT_TRUE(old.is_ok()) << old.error();
  EXPECT_EQ(old->format, 1);
  EXPECT_EQ(old->budget, 0);
  EXPECT_TRUE(old->steps[0].keep);
}

TEST(Sequence, Errors) {
  const std::vector<BadCase> cases = {
      {"format = 1\nname = \"s\"\n", "s.toml:1: the sequence has no steps"},
      {"format = 3\nname = \"s\"\n[[step]]\ntransformation = \"a\"\n",
       "s.toml:1: sequence format 3 is newer than this peak supports (format 2)"},
      {"format = 1\nname = \"s\"\n[[step]]\ntransformation = \"a\"\nkeep = false\n",
       "s.toml:5: 'keep' needs sequence format 2; write 'format = 2'"},
      {"format = 1\nname = \"s\"\nbudget = 8\n[[step]]\ntransformation = \"a\"\n",
       "s.toml:3: 'budget' needs sequence format 2"},
      {"format = 2\nname = \"s\"\n[[step]]\ntransformation = \"a\"\nkeep = \"no\"\n",
       "s.toml:5: 'keep' must be true or false, found a string"},
      {"format = 2\nname = \"s\"\n[[step]]\ntransformation = \"a\"\nbudget = 0\n",
       "s.toml:5: budget must be between 1 and 100000, found 0"},
      {"format = 1\nname = \"s\"\n[tuning]\nX = [1]\n[[step]]\ntransformation = \"a\"\n",
       "s.toml:3: 'tuning' needs sequence format 2"},
      {"format = 2\nname = \"s\"\n[tuning]\nX = 1\n[[step]]\ntransformation = \"a\"\n",
       "s.toml:4: 'X' must be an array of integers"},
      {"format = 1\nname = \"s\"\n[[step]]\ntransformaton = \"a\"\n",
       "s.toml:4: unknown key 'transformaton' in a [[step]]"},
      {"format = 1\nname = \"s\"\n[[step]]\nattempts = 2\n",
       "s.toml:3: missing key 'transformation' in a [[step]]"},
      {"format = 1\nname = \"s\"\n[[step]]\ntransformation = \"a\"\n[step.tuning]\nTILE_K = 16\n",
       "s.toml:6: 'TILE_K' must be an array of integers"},
      {"format = 1\nname = \"s\"\n[[step]]\ntransformation = \"a\"\nstrategy = 3\n",
       "s.toml:5: 'strategy' must be a string"},
      {"format = 1\nname = \"s\"\nattempts = 0\n[[step]]\ntransformation = \"a\"\n",
       "s.toml:3: attempts must be between 1 and 100"},
      {"format = 1\nname = \"s\"\n[[step]\n", "s.toml:3:"},
      {"name = \"s\"\n[[step]]\ntransformation = \"a\"\n", "missing key 'format'"},
  };
  for (const auto& c : cases) {
    auto r = parse_sequence(c.text, "s.toml");
    ASSERT_FALSE(r.is_ok()) << "accepted:\n" << c.text;
    EXPECT_NE(r.error().find(c.expected), std::string::npos)
        << "error: " << r.error() << "\nexpected to contain: " << c.expected;
  }
}

// ---- The library shipped with peak ----

// Lowercase, with every run of white space made one space (prose wraps across lines).
std::string lower(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
      continue;
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

TEST(RealLibrary, LoadsAndIsConsistent) {
  auto lib = load_library(std::string(PEAK_SOURCE_DIR) + "/transformations");
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  const Region m = Region::macros, d = Region::device, h = Region::host;
  const std::map<std::string, std::vector<Region>> expected_passes = {
      {"refactor", {m, d}},
      {"tb-tiling", {m, d, h}},
      {"thread-tiling", {m, d, h}},
      {"thread-cache", {d}},
      {"transpose", {m, d}},
      {"thread-chunk", {m, d}},
      {"split-k", {m, d, h}},
      {"pipelining", {m, d}},
      {"register-staging", {m, d}},
      {"offset", {m}},
      {"block-swizzle", {m, d}},
      {"warp-tiling", {m}},
      {"vectorize", {m, d}},
      {"fragment-prefetch", {d}},
      {"launch-bounds", {d}},
      {"stream-k", {m, d, h}},
      {"small-m", {m, d, h}},
      {"small-m-loads", {d}},
      {"stream-k-hybrid", {m, d}},
      {"stream-k-dispatch", {h}},
      {"data-parallel-kernel", {m, d, h}},
      // The tensor-core path (CUDA): sm_80 fragments, then Hopper's TMA, wgmma and setmaxnreg.
      {"tensor-core", {m, d, h}},
      {"tensor-tiling", {m, d}},
      {"tensor-pipelining", {m, d}},
      {"tma-loads", {m, d, h}},
      {"wgmma", {m, d, h}},
      {"warp-specialization", {m, d}},
      {"persistent", {m, d, h}},
      {"cluster", {m, d, h}},
      {"tensor-split-k", {m, d, h}},
      {"padded-operands", {d, h}},
      // fp8 (sm_89 and newer): mma.sync m16n8k32 e4m3 from K-major shared tiles.
      {"fp8-tensor-core", {m, d, h}},
      {"fp8-pipelining", {m, d}},
      // fp8 on Hopper: TMA and wgmma m64nNk32 e4m3; then, for both precisions, MMAs in flight.
      {"fp8-wgmma", {m, d, h}},
      {"wgmma-overlap", {d}},
      {"tma-store-epilogue", {m, d, h}},
      {"tensor-stream-k", {m, d, h}},
      // The row families (softmax, rmsnorm, layernorm), from the one-thread-per-row seed.
      {"row-per-block", {m, d, h}},
      {"warp-reduce", {m, d}},
      {"vector-loads", {m, d}},
      {"row-in-registers", {m, d}},
      {"online-softmax", {d}},
      {"rows-per-warp", {m, d, h}},
      {"split-row", {m, d, h}},
      {"persistent-rows", {d, h}},
      {"aligned-rows", {m, d}},
      {"cluster-rows", {m, d, h}},
      {"grid-rows", {d, h}},
      {"cluster-arrive", {d}},
      {"vectors-in-flight", {d}},
      {"sized-instances", {d, h}},
      {"sized-cluster", {m, d, h}},
      {"cluster-blocks", {d, h}},
      // Attention, from the naive three-kernel seed.
      {"fused-attention", {m, d, h}},
      {"split-kv", {m, d, h}},
      {"tensor-core-attention", {m, d, h}},
      {"pipelined-kv", {d}},
      {"wgmma-attention", {m, d, h}},
  };
  // Launch bounds are a CUDA/HIP attribute, and Stream-K's owners wait for other blocks, which
  // Vulkan does not promise to run; tensor-core is CUDA's and HIP's (matrix cores on gfx90a),
  // and so is the small-M path (its block shape is the launch's) and what builds on them, and the
  // row kernels' instances per row length (the HLSL sequence has no function templates); the
  // steps that need an NVIDIA architecture (mma.sync and ldmatrix in inline PTX, TMA, wgmma,
  // clusters) are CUDA's alone; every other step is written for all three.
  const std::set<std::string> cuda_and_hip_only = {
      "launch-bounds",  "stream-k",        "tensor-core",       "small-m",
      "small-m-loads",  "stream-k-hybrid", "stream-k-dispatch", "data-parallel-kernel",
      "sized-instances"};
  const std::set<std::string> cuda_only = {
      "tensor-tiling",         "tensor-pipelining",  "tma-loads",       "wgmma",
      "warp-specialization",   "persistent",         "cluster",         "tensor-split-k",
      "padded-operands",       "fp8-tensor-core",    "fp8-pipelining",  "fp8-wgmma",
      "wgmma-overlap",         "tma-store-epilogue", "cluster-rows",    "cluster-arrive",
      "tensor-core-attention", "pipelined-kv",       "wgmma-attention", "tensor-stream-k",
      "sized-cluster",         "cluster-blocks"};
  EXPECT_EQ(lib->size(), expected_passes.size()) << "a transformation without an entry here";
  for (const auto& [name, regions] : expected_passes) {
    auto t = find_transformation(*lib, name);
    ASSERT_TRUE(t.is_ok()) << t.error();
    std::vector<Region> got;
    for (const auto& p : t->passes) got.push_back(p.region);
    EXPECT_EQ(got, regions) << name;
    EXPECT_FALSE(t->description.empty()) << name;
    for (const char* backend : {"cuda", "hip", "hlsl"}) {
      if (cuda_only.count(name) && std::string(backend) != "cuda") {
        EXPECT_FALSE(t->supports(backend)) << name << " " << backend;
        EXPECT_FALSE(t->required_arch.empty()) << name << " names the architecture it needs";
        continue;
      }
      if (cuda_and_hip_only.count(name) && std::string(backend) == "hlsl") {
        EXPECT_FALSE(t->supports(backend));
        continue;
      }
      EXPECT_TRUE(t->supports(backend)) << name << " " << backend;
      EXPECT_TRUE(t->translations.count(backend)) << name << " lacks translations." << backend;
    }
    // Every backend translates the same phrases, and each phrase is used in the text.
    std::string text = lower(t->description);
    for (const auto& p : t->passes) text += " " + lower(p.instruction);
    std::set<std::string> phrases;
    for (const auto& [backend, table] : t->translations)
      for (const auto& [phrase, spelling] : table) phrases.insert(phrase);
    for (const auto& [backend, table] : t->translations) {
      for (const auto& phrase : phrases)
        EXPECT_TRUE(table.count(phrase))
            << name << ": translations." << backend << " lacks '" << phrase << "'";
    }
    for (const auto& phrase : phrases)
      EXPECT_NE(text.find(lower(phrase)), std::string::npos)
          << name << ": the phrase '" << phrase << "' is translated but never used";
    // Every value is a power of two, 0 (an offset that switches a padding off) or a small count
    // (3 pipeline stages).
    for (const auto& p : t->tuning) {
      for (int64_t v : p.values)
        EXPECT_TRUE(v >= 0 && ((v & (v - 1)) == 0 || v <= 8)) << p.name << "=" << v;
      // Every introduced parameter is named in the pass text.
      EXPECT_NE(text.find(lower(p.name)), std::string::npos) << p.name;
    }
  }
  auto tb = find_transformation(*lib, "tb-tiling");
  ASSERT_TRUE(tb.is_ok());
  ASSERT_EQ(tb->tuning.size(), 1u);
  EXPECT_EQ(tb->tuning[0].name, "TILE_K");
  EXPECT_LE(tb->passes.size(), 6u);
  auto tt = find_transformation(*lib, "thread-tiling");
  ASSERT_TRUE(tt.is_ok());
  std::set<std::string> tt_names;
  for (const auto& p : tt->tuning) tt_names.insert(p.name);
  EXPECT_EQ(tt_names, (std::set<std::string>{"TRD_X_DIM", "TRD_Y_DIM"}));
}

TEST(RealLibrary, SequencesNameExistingTransformations) {
  auto lib = load_library(std::string(PEAK_SOURCE_DIR) + "/transformations");
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  for (const char* file : {"hlsl-fp32.toml", "cuda-fp32.toml", "hip-fp32.toml"}) {
    auto seq = load_sequence(std::string(PEAK_SOURCE_DIR) + "/sequences/" + file);
    ASSERT_TRUE(seq.is_ok()) << seq.error();
    std::vector<std::string> steps;
    for (const auto& s : seq->steps) {
      steps.push_back(s.transformation);
      auto t = find_transformation(*lib, s.transformation);
      EXPECT_TRUE(t.is_ok()) << file << ": " << t.error();
      if (t.is_ok() && std::string(file) == "hip-fp32.toml") {
        EXPECT_TRUE(t->supports("hip")) << s.transformation;
        EXPECT_TRUE(t->translations.count("hip")) << s.transformation << ": no HIP table";
      }
    }
    // The paper's eleven fp32 steps in the paper's order, then what this library adds.
    std::vector<std::string> expected = {
        "refactor",      "tb-tiling",   "thread-tiling", "thread-cache",     "transpose",
        "thread-chunk",  "split-k",     "pipelining",    "register-staging", "offset",
        "block-swizzle", "warp-tiling", "vectorize",     "fragment-prefetch"};
    // HIP's sequence is CUDA's, step for step.
    if (std::string(file) == "cuda-fp32.toml" || std::string(file) == "hip-fp32.toml") {
      expected.push_back("launch-bounds");
      expected.push_back("stream-k");
      expected.push_back("small-m");
      expected.push_back("small-m-loads");
      expected.push_back("stream-k-hybrid");
      expected.push_back("stream-k-dispatch");
      expected.push_back("data-parallel-kernel");
    }
    EXPECT_EQ(steps, expected) << file;
    EXPECT_EQ(seq->path.filename(), file);
    // Split-K is measured and set aside: the square bench shapes fill the GPU without it; so are
    // the Stream-K hybrid and the Stream-K dispatch, no faster on the H100 at 2048.
    const std::set<std::string> set_aside = {"split-k", "stream-k-hybrid", "stream-k-dispatch"};
    for (const auto& s : seq->steps) EXPECT_EQ(s.keep, !set_aside.count(s.transformation)) << file;
  }
  // HIP's campaign is CUDA's: the same budgets, value sets, strategies and narrowed spaces.
  auto cuda = load_sequence(std::string(PEAK_SOURCE_DIR) + "/sequences/cuda-fp32.toml");
  auto hip = load_sequence(std::string(PEAK_SOURCE_DIR) + "/sequences/hip-fp32.toml");
  ASSERT_TRUE(cuda.is_ok() && hip.is_ok());
  EXPECT_EQ(hip->format, cuda->format);
  EXPECT_EQ(hip->attempts, cuda->attempts);
  EXPECT_EQ(hip->budget, cuda->budget);
  EXPECT_EQ(hip->tuning, cuda->tuning);
  ASSERT_EQ(hip->steps.size(), cuda->steps.size());
  for (size_t i = 0; i < hip->steps.size(); ++i) {
    const SequenceStep& h = hip->steps[i];
    const SequenceStep& c = cuda->steps[i];
    EXPECT_EQ(h.transformation, c.transformation) << i;
    EXPECT_EQ(h.attempts, c.attempts) << c.transformation;
    EXPECT_EQ(h.budget, c.budget) << c.transformation;
    EXPECT_EQ(h.keep, c.keep) << c.transformation;
    EXPECT_EQ(h.tuning, c.tuning) << c.transformation;
    EXPECT_EQ(h.strategy, c.strategy) << c.transformation;
    EXPECT_EQ(h.strategy_budget, c.strategy_budget) << c.transformation;
  }
}

}  // namespace
}  // namespace peak
