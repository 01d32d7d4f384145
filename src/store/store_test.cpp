#include "store/store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "util/fs.h"
#include "util/sha256.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

class StoreTest : public testing::TempDirTest {
 protected:
  StoreTest() : TempDirTest("peak-store-test-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    dir_ = root_ / ".peak";
  }
  std::unique_ptr<Store> open_store(bool create = true) {
    auto s = Store::open(dir_, create);
    EXPECT_TRUE(s.is_ok()) << s.error();
    return s.is_ok() ? std::move(s).value() : nullptr;
  }
  // Runs SQL directly on peak.db (outside the Store); returns the first column of the first row.
  std::string raw_sql(const std::string& sql, int* rc_out = nullptr) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ / "peak.db").c_str(), &db), SQLITE_OK);
    std::string first;
    char* err = nullptr;
    int rc = sqlite3_exec(
        db, sql.c_str(),
        [](void* out, int n, char** vals, char**) {
          auto* s = static_cast<std::string*>(out);
          if (s->empty() && n > 0 && vals[0]) *s = vals[0];
          return 0;
        },
        &first, &err);
    if (err) {
      first = err;
      sqlite3_free(err);
    }
    sqlite3_close(db);
    if (rc_out) {
      *rc_out = rc;
    } else {
      EXPECT_EQ(rc, SQLITE_OK) << first;
    }
    return first;
  }
  CheckpointRecord seed_checkpoint(Store& st) {
    CheckpointRecord c;
    c.branch = "main";
    c.message = "seed";
    c.context_blob = *st.put_blob("[kernel]\nname = \"matmul\"\n");
    c.source_blob = *st.put_blob("__global__ void k() {}\n");
    c.summary_json = R"({"disposition":"passed","gflops":5300.5})";
    c.top_configs_json = R"([{"TILE":16}])";
    return c;
  }

  const std::filesystem::path& root_ = temp_dir();
  std::filesystem::path dir_;
};

const std::regex kTimestamp(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");

TEST(StoreTime, Iso8601WithMilliseconds) {
  std::string t = utc_now_iso8601();
  EXPECT_TRUE(std::regex_match(t, kTimestamp)) << t;
  EXPECT_EQ(t.size(), 24u);
}

TEST_F(StoreTest, OpenWithoutCreateOnMissingFolderFails) {
  auto s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("peak init"), std::string::npos) << s.error();
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

TEST_F(StoreTest, CreateWritesLayoutAndReopenKeepsData) {
  int64_t id = 0;
  {
    auto st = open_store(true);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->dir(), dir_);
    auto r = st->add_checkpoint(seed_checkpoint(*st));
    ASSERT_TRUE(r.is_ok()) << r.error();
    id = *r;
    EXPECT_GT(id, 0);
  }
  EXPECT_EQ(*read_file(dir_ / "FORMAT"), "peak-store 1\n");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_ / "peak.db"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "blobs"));
  EXPECT_EQ(raw_sql("PRAGMA user_version"), std::to_string(kStoreSchemaVersion));
  EXPECT_EQ(raw_sql("PRAGMA journal_mode"), "wal");
  {
    auto st = open_store(false);
    ASSERT_TRUE(st);
    auto c = st->checkpoint(id);
    ASSERT_TRUE(c.is_ok()) << c.error();
    EXPECT_EQ(c->message, "seed");
  }
  {
    auto st = open_store(true);  // create on an existing store keeps it
    ASSERT_TRUE(st);
    EXPECT_EQ(st->checkpoints()->size(), 1u);
  }
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  { ASSERT_TRUE(open_store(true)); }
  raw_sql("PRAGMA user_version = 99");
  auto s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error(),
            "this workspace was written by a newer peak (schema 99; this peak reads up to " +
                std::to_string(kStoreSchemaVersion) + "); upgrade peak");
  EXPECT_FALSE(Store::open(dir_, true).is_ok());
}

TEST_F(StoreTest, NewerOrForeignFormatIsRefused) {
  { ASSERT_TRUE(open_store(true)); }
  ASSERT_TRUE(write_file(dir_ / "FORMAT", "peak-store 2\n"));
  auto s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("newer peak (store layout 2; this peak reads up to 1)"),
            std::string::npos)
      << s.error();
  ASSERT_TRUE(write_file(dir_ / "FORMAT", "something else\n"));
  s = Store::open(dir_, true);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("not written by peak"), std::string::npos) << s.error();
  std::filesystem::remove(dir_ / "FORMAT");
  s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("FORMAT is missing"), std::string::npos) << s.error();
}

TEST_F(StoreTest, AStoreWithoutOrWithAForeignFormatIsDamaged) {
  { ASSERT_TRUE(open_store(true)); }
  ASSERT_TRUE(write_file(dir_ / "FORMAT", "garbage\n"));
  auto s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error_kind(), ErrorKind::environment);
  EXPECT_NE(s.error().find("damaged"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("PRAGMA integrity_check"), std::string::npos) << s.error();
  EXPECT_EQ(s.error().find("peak init"), std::string::npos) << s.error();
  std::filesystem::remove(dir_ / "FORMAT");
  s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error_kind(), ErrorKind::environment);
  EXPECT_NE(s.error().find("is damaged"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("PRAGMA integrity_check"), std::string::npos) << s.error();
  EXPECT_EQ(s.error().find("peak init"), std::string::npos) << s.error();
}

TEST_F(StoreTest, AnEmptiedDatabaseIsDamagedAndStaysEmpty) {
  {
    auto st = open_store(true);
    ASSERT_TRUE(st);
    ASSERT_TRUE(st->add_checkpoint(seed_checkpoint(*st)).is_ok());
  }
  ASSERT_TRUE(write_file(dir_ / "peak.db", ""));
  std::error_code ec;
  std::filesystem::remove(dir_ / "peak.db-wal", ec);
  std::filesystem::remove(dir_ / "peak.db-shm", ec);
  auto s = Store::open(dir_, false);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error_kind(), ErrorKind::environment);
  EXPECT_NE(s.error().find("damaged"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("PRAGMA integrity_check"), std::string::npos) << s.error();
  EXPECT_EQ(std::filesystem::file_size(dir_ / "peak.db"), 0u);  // no schema written
  auto r = Store::open_read_only(dir_);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.error_kind(), ErrorKind::environment);
  EXPECT_NE(r.error().find("PRAGMA integrity_check"), std::string::npos) << r.error();
  EXPECT_EQ(std::filesystem::file_size(dir_ / "peak.db"), 0u);
}

TEST_F(StoreTest, SchemaTwoIsMigratedWithItsRowsKept) {
  int64_t id = 0;
  {
    auto st = open_store(true);
    ASSERT_TRUE(st);
    id = *st->add_checkpoint(seed_checkpoint(*st));
  }
  // A schema-2 store: the same tables without the tuning ones.
  raw_sql("DROP TABLE tuning_configs; DROP TABLE tuning_runs; PRAGMA user_version = 2");
  {
    auto st = open_store(false);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->checkpoint(id)->message, "seed");
    TuningRunRecord run;
    run.checkpoint_id = id;
    run.strategy = "auto";
    auto r = st->add_tuning_run(run);
    ASSERT_TRUE(r.is_ok()) << r.error();
  }
  EXPECT_EQ(raw_sql("PRAGMA user_version"), std::to_string(kStoreSchemaVersion));
  int rc = 0;
  raw_sql("DELETE FROM tuning_runs", &rc);
  EXPECT_NE(rc, SQLITE_OK);  // append-only after the migration too
}

TEST_F(StoreTest, TuningRunsAndConfigurationsRoundTrip) {
  auto st = open_store();
  ASSERT_TRUE(st);
  int64_t cp = *st->add_checkpoint(seed_checkpoint(*st));
  TuningRunRecord run;
  run.checkpoint_id = cp;
  run.source_hash = std::string(64, 'a');
  run.strategy = "bayes";
  run.options_json = R"({"budget":"24,15%"})";
  run.space_json = R"({"parameters":[]})";
  auto rid = st->add_tuning_run(run);
  ASSERT_TRUE(rid.is_ok()) << rid.error();
  TuningConfigRecord pruned;
  pruned.run_id = *rid;
  pruned.config_json = R"({"X":64})";
  pruned.stage = "validity";
  pruned.disposition = "invalid_config";
  pruned.reason = "tuning_valid: `X <= 32` is false (X=64)";
  TuningConfigRecord timed = pruned;
  timed.position = 0;
  timed.config_json = R"({"X":16})";
  timed.stage = "time";
  timed.disposition = "passed";
  timed.reason = "";
  timed.score_ms = 1.25;
  timed.compile_s = 0.5;
  timed.validate_s = std::nan("");
  timed.resources_json = R"({"threads":256})";
  ASSERT_TRUE(st->add_tuning_configs({pruned, timed}));
  auto runs = st->tuning_runs();
  ASSERT_TRUE(runs.is_ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().strategy, "bayes");
  EXPECT_EQ(runs->front().checkpoint_id, cp);
  EXPECT_FALSE(runs->front().attempt_id);
  EXPECT_TRUE(std::regex_match(runs->front().created_at, kTimestamp));
  auto rows = st->tuning_configs(*rid);
  ASSERT_TRUE(rows.is_ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].position, -1);
  EXPECT_EQ((*rows)[0].reason, pruned.reason);
  EXPECT_EQ((*rows)[1].score_ms, 1.25);
  EXPECT_TRUE(std::isnan((*rows)[1].validate_s));
  EXPECT_EQ((*rows)[1].resources_json, timed.resources_json);
  // A row naming no run fails, and nothing of its batch is kept.
  TuningConfigRecord orphan = timed;
  orphan.run_id = 999;
  EXPECT_FALSE(st->add_tuning_configs({timed, orphan}));
  EXPECT_EQ(st->tuning_configs(*rid)->size(), 2u);
}

TEST_F(StoreTest, UnversionedNonEmptyDatabaseIsRefused) {
  std::filesystem::create_directories(dir_);
  raw_sql("CREATE TABLE stuff(x)");
  auto s = Store::open(dir_, true);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("no peak schema version"), std::string::npos) << s.error();
  EXPECT_EQ(raw_sql("PRAGMA user_version"), "0");  // left untouched
}

TEST_F(StoreTest, ReadOnlyOpenOfALoneDatabaseFileWritesNothing) {
  {
    auto st = open_store(true);
    ASSERT_TRUE(st);
    CheckpointRecord c;
    c.message = "seed";
    ASSERT_TRUE(st->add_checkpoint(c).is_ok());
  }
  // A lone copy of peak.db, as kept under results/.
  std::filesystem::path copy = root_ / "kept" / "campaign-peak.db";
  std::filesystem::create_directories(copy.parent_path());
  std::filesystem::copy_file(dir_ / "peak.db", copy);
  {
    auto ro = Store::open_read_only(copy);
    ASSERT_TRUE(ro.is_ok()) << ro.error();
    EXPECT_FALSE((*ro)->has_blobs());
    auto cps = (*ro)->checkpoints();
    ASSERT_TRUE(cps.is_ok()) << cps.error();
    EXPECT_EQ(cps->size(), 1u);
    CheckpointRecord c;
    EXPECT_FALSE((*ro)->add_checkpoint(c).is_ok());  // read only
  }
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(copy.parent_path()))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"campaign-peak.db"});
  // The .peak folder of a workspace reads the same, blobs included.
  auto ro = Store::open_read_only(dir_);
  ASSERT_TRUE(ro.is_ok()) << ro.error();
  EXPECT_TRUE((*ro)->has_blobs());
}

TEST_F(StoreTest, ReadOnlyOpenRefusesOtherSchemasAndForeignFiles) {
  { ASSERT_TRUE(open_store(true)); }
  raw_sql("PRAGMA user_version = 99");
  auto s = Store::open_read_only(dir_);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("newer peak (schema 99"), std::string::npos) << s.error();
  raw_sql("PRAGMA user_version = 0");
  s = Store::open_read_only(dir_ / "peak.db");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("no peak schema version"), std::string::npos) << s.error();
  s = Store::open_read_only(root_ / "nothing-here.db");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("no such file or folder"), std::string::npos) << s.error();
  ASSERT_TRUE(write_file(root_ / "notes.db", "these are not the rows you are looking for\n"));
  s = Store::open_read_only(root_ / "notes.db");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("notes.db"), std::string::npos) << s.error();
}

TEST_F(StoreTest, CheckpointRoundTrip) {
  auto st = open_store();
  ASSERT_TRUE(st);
  CheckpointRecord seed = seed_checkpoint(*st);
  int64_t a = *st->add_checkpoint(seed);
  CheckpointRecord child = seed;
  child.parent = a;
  child.transformation = "tb-tiling";
  child.message = "apply tb-tiling";
  child.branch = "try-split-k";
  auto b = st->add_checkpoint(child);
  ASSERT_TRUE(b.is_ok()) << b.error();
  EXPECT_EQ(*b, a + 1);

  auto all = st->checkpoints();
  ASSERT_TRUE(all.is_ok()) << all.error();
  ASSERT_EQ(all->size(), 2u);
  const CheckpointRecord& r = (*all)[1];
  EXPECT_EQ(r.id, *b);
  EXPECT_EQ(r.parent, a);
  EXPECT_EQ(r.branch, "try-split-k");
  EXPECT_EQ(r.transformation, "tb-tiling");
  EXPECT_EQ(r.message, "apply tb-tiling");
  EXPECT_EQ(r.context_blob, seed.context_blob);
  EXPECT_EQ(r.source_blob, seed.source_blob);
  EXPECT_EQ(r.summary_json, seed.summary_json);
  EXPECT_EQ(r.top_configs_json, seed.top_configs_json);
  EXPECT_TRUE(std::regex_match(r.created_at, kTimestamp)) << r.created_at;
  EXPECT_FALSE((*all)[0].parent.has_value());

  EXPECT_FALSE(st->checkpoint(42).is_ok());
  CheckpointRecord orphan = seed;
  orphan.parent = 42;
  auto bad = st->add_checkpoint(orphan);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().find("not in the store"), std::string::npos) << bad.error();
  CheckpointRecord detached = seed;  // made on a detached HEAD: no branch
  detached.branch = "";
  auto d = st->add_checkpoint(detached);
  ASSERT_TRUE(d.is_ok()) << d.error();
  EXPECT_EQ(st->checkpoint(*d)->branch, "");
  CheckpointRecord badbranch = seed;
  badbranch.branch = "two words";
  EXPECT_FALSE(st->add_checkpoint(badbranch).is_ok());
}

TEST_F(StoreTest, WorkflowRoundTripAndUpdate) {
  auto st = open_store();
  ASSERT_TRUE(st);
  WorkflowRecord w;
  w.kind = "run";
  w.args_json = R"({"sequence":"sequences/cuda-fp32.toml"})";
  auto id = st->add_workflow(w);
  ASSERT_TRUE(id.is_ok()) << id.error();
  auto r = st->workflow(*id);
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->kind, "run");
  EXPECT_EQ(r->args_json, w.args_json);
  EXPECT_EQ(r->status, "running");
  EXPECT_TRUE(std::regex_match(r->started_at, kTimestamp)) << r->started_at;
  EXPECT_EQ(r->finished_at, "");
  EXPECT_EQ(r->state_json, "");

  ASSERT_TRUE(st->update_workflow(*id, "interrupted", R"({"step":3})"));
  r = st->workflow(*id);
  EXPECT_EQ(r->status, "interrupted");
  EXPECT_EQ(r->state_json, R"({"step":3})");
  EXPECT_TRUE(std::regex_match(r->finished_at, kTimestamp)) << r->finished_at;
  ASSERT_TRUE(st->update_workflow(*id, "running", R"({"step":3})"));  // resumed
  EXPECT_EQ(st->workflow(*id)->finished_at, "");
  ASSERT_TRUE(st->update_workflow(*id, "passed", R"({"step":5})"));

  ASSERT_TRUE(st->update_workflow(*id, "waiting", R"({"step":4})"));  // for a manual reply
  EXPECT_EQ(st->workflow(*id)->finished_at, "");
  ASSERT_TRUE(st->update_workflow(*id, "passed", R"({"step":5})"));
  EXPECT_TRUE(std::regex_match(st->workflow(*id)->finished_at, kTimestamp));
  EXPECT_FALSE(st->update_workflow(*id, "", "{}").is_ok());
  EXPECT_FALSE(st->update_workflow(*id, "Paused!", "{}").is_ok());
  EXPECT_EQ(st->workflow(*id)->state_json, R"({"step":5})");  // failed updates change nothing
  EXPECT_FALSE(st->update_workflow(999, "passed", "{}").is_ok());
  EXPECT_FALSE(st->workflow(999).is_ok());
  WorkflowRecord bad;
  EXPECT_FALSE(st->add_workflow(bad).is_ok());  // no kind
  bad.kind = "tune";
  bad.status = "not a status";
  EXPECT_FALSE(st->add_workflow(bad).is_ok());

  WorkflowRecord w2;
  w2.kind = "tune";
  int64_t id2 = *st->add_workflow(w2);
  auto all = st->workflows();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, *id);
  EXPECT_EQ((*all)[0].status, "passed");
  EXPECT_EQ((*all)[1].id, id2);
}

TEST_F(StoreTest, AttemptRoundTripAndFilter) {
  auto st = open_store();
  ASSERT_TRUE(st);
  int64_t cp = *st->add_checkpoint(seed_checkpoint(*st));
  WorkflowRecord w;
  w.kind = "apply";
  int64_t w1 = *st->add_workflow(w);
  int64_t w2 = *st->add_workflow(w);

  AttemptRecord a;
  a.workflow_id = w1;
  a.parent_checkpoint = cp;
  a.transformation = "tb-tiling";
  a.pass_index = 1;
  a.attempt = 2;
  a.region = "device";
  a.driver = "openai";
  a.model = "gpt-5";
  a.producer = "openai:gpt-5";
  a.prompt_key = sha256_hex("prompt");
  a.prompt_blob = *st->put_blob("prompt");
  a.reply_blob = *st->put_blob("reply");
  a.prompt_tokens = 1234;
  a.completion_tokens = 567;
  a.latency_s = 12.5;
  a.disposition = "compile_failed";
  a.error = "error: expected ';'";
  auto id = st->add_attempt(a);
  ASSERT_TRUE(id.is_ok()) << id.error();
  AttemptRecord other;
  other.workflow_id = w2;
  other.infrastructure = true;
  ASSERT_TRUE(st->add_attempt(other).is_ok());
  AttemptRecord loose;  // workflow 0: not part of a workflow
  ASSERT_TRUE(st->add_attempt(loose).is_ok());

  auto mine = st->attempts(w1);
  ASSERT_TRUE(mine.is_ok()) << mine.error();
  ASSERT_EQ(mine->size(), 1u);
  const AttemptRecord& r = (*mine)[0];
  EXPECT_EQ(r.id, *id);
  EXPECT_EQ(r.workflow_id, w1);
  EXPECT_EQ(r.parent_checkpoint, cp);
  EXPECT_EQ(r.transformation, "tb-tiling");
  EXPECT_EQ(r.pass_index, 1);
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(r.region, "device");
  EXPECT_EQ(r.driver, "openai");
  EXPECT_EQ(r.model, "gpt-5");
  EXPECT_EQ(r.producer, "openai:gpt-5");
  EXPECT_EQ(r.prompt_key, a.prompt_key);
  EXPECT_EQ(r.prompt_blob, a.prompt_blob);
  EXPECT_EQ(r.reply_blob, a.reply_blob);
  EXPECT_EQ(r.prompt_tokens, 1234);
  EXPECT_EQ(r.completion_tokens, 567);
  EXPECT_DOUBLE_EQ(r.latency_s, 12.5);
  EXPECT_EQ(r.disposition, "compile_failed");
  EXPECT_EQ(r.error, "error: expected ';'");
  EXPECT_TRUE(std::regex_match(r.created_at, kTimestamp));
  EXPECT_FALSE(r.infrastructure);
  EXPECT_TRUE((*st->attempts(w2))[0].infrastructure);
  EXPECT_EQ(st->attempts()->size(), 3u);
  EXPECT_EQ(st->attempts()->back().workflow_id, 0);
  EXPECT_EQ(st->attempts(999)->size(), 0u);

  AttemptRecord dangling;
  dangling.workflow_id = 999;
  auto bad = st->add_attempt(dangling);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().find("not in the store"), std::string::npos) << bad.error();
}

TEST_F(StoreTest, BuildRoundTripAndFilter) {
  auto st = open_store();
  ASSERT_TRUE(st);
  AttemptRecord a;
  int64_t att = *st->add_attempt(a);
  BuildRecord b;
  b.attempt_id = att;
  b.source_hash = sha256_hex("src");
  b.config_json = R"({"TILE":32})";
  b.command = "nvcc -O3 -DTILE=32 k.cu";
  b.exit_code = 2;
  b.log_blob = *st->put_blob("k.cu(3): error");
  b.seconds = 1.75;
  b.disposition = "compile_failed";
  b.resources_json = R"({"registers":64})";
  b.toolchain = "nvcc 13.0";
  b.cached = true;
  auto id = st->add_build(b);
  ASSERT_TRUE(id.is_ok()) << id.error();
  BuildRecord unattached;
  unattached.seconds = std::nan("");
  ASSERT_TRUE(st->add_build(unattached).is_ok());

  auto mine = st->builds(att);
  ASSERT_TRUE(mine.is_ok()) << mine.error();
  ASSERT_EQ(mine->size(), 1u);
  const BuildRecord& r = (*mine)[0];
  EXPECT_EQ(r.id, *id);
  EXPECT_EQ(r.attempt_id, att);
  EXPECT_EQ(r.source_hash, b.source_hash);
  EXPECT_EQ(r.config_json, b.config_json);
  EXPECT_EQ(r.command, b.command);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.log_blob, b.log_blob);
  EXPECT_DOUBLE_EQ(r.seconds, 1.75);
  EXPECT_EQ(r.disposition, "compile_failed");
  EXPECT_EQ(r.resources_json, b.resources_json);
  EXPECT_EQ(r.toolchain, "nvcc 13.0");
  EXPECT_TRUE(r.cached);
  EXPECT_TRUE(std::regex_match(r.created_at, kTimestamp));
  auto all = st->builds();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_FALSE((*all)[1].attempt_id.has_value());
  EXPECT_FALSE((*all)[1].cached);
  EXPECT_TRUE(std::isnan((*all)[1].seconds));  // NaN survives (stored as NULL)
}

TEST_F(StoreTest, ValidationRoundTripAndFilter) {
  auto st = open_store();
  ASSERT_TRUE(st);
  int64_t cp = *st->add_checkpoint(seed_checkpoint(*st));
  int64_t att = *st->add_attempt(AttemptRecord{});
  ValidationRecord v;
  v.attempt_id = att;
  v.checkpoint_id = cp;
  v.config_json = R"({"TILE":16})";
  v.shape = "M=1024 N=1024 K=1024";
  v.hidden = true;
  v.seed = 1234567890123LL;
  v.max_abs_err = 1.5e-6;
  v.max_rel_err = INFINITY;
  v.disposition = "incorrect";
  v.message = "element (3, 4): 1.0 vs 2.0";
  v.seconds = 0.25;
  auto id = st->add_validation(v);
  ASSERT_TRUE(id.is_ok()) << id.error();
  ASSERT_TRUE(st->add_validation(ValidationRecord{}).is_ok());
  auto mine = st->validations(att);
  ASSERT_TRUE(mine.is_ok()) << mine.error();
  ASSERT_EQ(mine->size(), 1u);
  const ValidationRecord& r = (*mine)[0];
  EXPECT_EQ(r.id, *id);
  EXPECT_EQ(r.attempt_id, att);
  EXPECT_EQ(r.checkpoint_id, cp);
  EXPECT_EQ(r.config_json, v.config_json);
  EXPECT_EQ(r.shape, v.shape);
  EXPECT_TRUE(r.hidden);
  EXPECT_EQ(r.seed, 1234567890123LL);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 1.5e-6);
  EXPECT_TRUE(std::isinf(r.max_rel_err));
  EXPECT_EQ(r.disposition, "incorrect");
  EXPECT_EQ(r.message, v.message);
  EXPECT_DOUBLE_EQ(r.seconds, 0.25);
  EXPECT_TRUE(std::regex_match(r.created_at, kTimestamp));
  EXPECT_EQ(st->validations()->size(), 2u);
  EXPECT_FALSE(st->validations()->back().hidden);
}

TEST_F(StoreTest, MeasurementRoundTripAndFilter) {
  auto st = open_store();
  ASSERT_TRUE(st);
  int64_t cp = *st->add_checkpoint(seed_checkpoint(*st));
  MeasurementRecord m;
  m.checkpoint_id = cp;
  m.config_json = R"({"TILE":64})";
  m.shape = "M=4096 N=4096 K=4096";
  m.what = "baseline:cublas";
  m.samples_json = "[2.68,2.69,2.70]";
  m.median_ms = 2.69;
  m.spread = 0.004;
  m.gflops = 51093.1;
  m.disposition = "passed";
  m.device_json = R"({"device":"H100"})";
  auto id = st->add_measurement(m);
  ASSERT_TRUE(id.is_ok()) << id.error();
  MeasurementRecord other;
  other.what = "candidate";
  ASSERT_TRUE(st->add_measurement(other).is_ok());
  auto mine = st->measurements(cp);
  ASSERT_TRUE(mine.is_ok()) << mine.error();
  ASSERT_EQ(mine->size(), 1u);
  const MeasurementRecord& r = (*mine)[0];
  EXPECT_EQ(r.id, *id);
  EXPECT_FALSE(r.attempt_id.has_value());
  EXPECT_EQ(r.checkpoint_id, cp);
  EXPECT_EQ(r.config_json, m.config_json);
  EXPECT_EQ(r.shape, m.shape);
  EXPECT_EQ(r.what, "baseline:cublas");
  EXPECT_EQ(r.samples_json, m.samples_json);
  EXPECT_DOUBLE_EQ(r.median_ms, 2.69);
  EXPECT_DOUBLE_EQ(r.spread, 0.004);
  EXPECT_DOUBLE_EQ(r.gflops, 51093.1);
  EXPECT_EQ(r.disposition, "passed");
  EXPECT_EQ(r.device_json, m.device_json);
  EXPECT_TRUE(std::regex_match(r.created_at, kTimestamp));
  auto all = st->measurements();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].what, "candidate");
}

TEST_F(StoreTest, AttemptCheckpointLinks) {
  auto st = open_store();
  ASSERT_TRUE(st);
  int64_t cp = *st->add_checkpoint(seed_checkpoint(*st));
  int64_t a1 = *st->add_attempt(AttemptRecord{});
  int64_t a2 = *st->add_attempt(AttemptRecord{});
  ASSERT_TRUE(st->attach_attempt_to_checkpoint(a2, cp));
  ASSERT_TRUE(st->attach_attempt_to_checkpoint(a1, cp));
  ASSERT_TRUE(st->attach_attempt_to_checkpoint(a1, cp));  // once is enough; again is harmless
  EXPECT_EQ(*st->checkpoint_attempts(cp), (std::vector<int64_t>{a1, a2}));
  EXPECT_TRUE(st->checkpoint_attempts(cp + 1)->empty());
  auto bad = st->attach_attempt_to_checkpoint(a1, cp + 7);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("not in the store"), std::string::npos) << bad.message();
}

TEST_F(StoreTest, MetaRoundTrip) {
  auto st = open_store();
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->meta("reference.abc")->has_value());
  ASSERT_TRUE(st->set_meta("reference.abc", "1"));
  ASSERT_TRUE(st->set_meta("reference.abc", "2"));
  EXPECT_EQ(**st->meta("reference.abc"), "2");
  ASSERT_TRUE(st->set_meta("quote'\"; DROP TABLE meta; --", "x"));  // values are bound, not spliced
  EXPECT_EQ(**st->meta("quote'\"; DROP TABLE meta; --"), "x");
  EXPECT_FALSE(st->set_meta("", "x").is_ok());
}

TEST_F(StoreTest, BlobsAreContentAddressedAndDeduplicated) {
  auto st = open_store();
  ASSERT_TRUE(st);
  std::string data("binary\0data\xff", 12);
  auto h = st->put_blob(data);
  ASSERT_TRUE(h.is_ok()) << h.error();
  EXPECT_EQ(*h, sha256_hex(data));
  auto path = dir_ / "blobs" / h->substr(0, 2) / h->substr(2);
  ASSERT_TRUE(std::filesystem::is_regular_file(path));
  auto before = std::filesystem::last_write_time(path);
  EXPECT_EQ(*st->put_blob(data), *h);
  EXPECT_EQ(std::filesystem::last_write_time(path), before);  // not rewritten
  size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir_ / "blobs"))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  auto back = st->get_blob(*h);
  ASSERT_TRUE(back.is_ok()) << back.error();
  EXPECT_EQ(*back, data);
  EXPECT_EQ(*st->get_blob(*st->put_blob("")), "");
}

TEST_F(StoreTest, BlobCorruptionIsDetected) {
  auto st = open_store();
  ASSERT_TRUE(st);
  auto h = *st->put_blob("original content");
  auto path = dir_ / "blobs" / h.substr(0, 2) / h.substr(2);
  ASSERT_TRUE(write_file(path, "original c0ntent"));  // same size, different bytes
  auto r = st->get_blob(h);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error().find("corrupt"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(path.string()), std::string::npos) << r.error();

  ASSERT_TRUE(write_file(path, "trunc"));  // a damaged size is repaired by the next put
  ASSERT_TRUE(st->put_blob("original content").is_ok());
  EXPECT_EQ(*st->get_blob(h), "original content");

  std::filesystem::remove(path);
  r = st->get_blob(h);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error().find("missing"), std::string::npos) << r.error();
  EXPECT_FALSE(st->get_blob("../../etc/passwd").is_ok());
  EXPECT_FALSE(st->get_blob(std::string(64, 'G')).is_ok());
}

TEST_F(StoreTest, RefsTagsAndHead) {
  auto st = open_store();
  ASSERT_TRUE(st);
  EXPECT_EQ(*st->head(), "main");
  EXPECT_FALSE(st->head_checkpoint()->has_value());  // unborn branch
  int64_t c1 = *st->add_checkpoint(seed_checkpoint(*st));
  int64_t c2 = *st->add_checkpoint(seed_checkpoint(*st));

  ASSERT_TRUE(st->set_ref("main", c1));
  EXPECT_EQ(*st->head_checkpoint(), c1);
  ASSERT_TRUE(st->set_ref("main", c2));  // a branch head moves
  EXPECT_EQ(*st->ref("main"), c2);
  EXPECT_EQ(*st->head_checkpoint(), c2);
  ASSERT_TRUE(st->set_ref("try-split-k", c1));
  EXPECT_EQ(*st->refs(), (std::map<std::string, int64_t>{{"main", c2}, {"try-split-k", c1}}));
  EXPECT_FALSE(st->ref("nope")->has_value());
  EXPECT_FALSE(st->set_ref("main", 999).is_ok());
  EXPECT_FALSE(st->set_ref("", c1).is_ok());
  EXPECT_FALSE(st->set_ref("#1", c1).is_ok());
  EXPECT_FALSE(st->set_ref("a b", c1).is_ok());

  ASSERT_TRUE(st->set_head("try-split-k"));
  EXPECT_EQ(*st->head(), "try-split-k");
  EXPECT_EQ(*st->head_checkpoint(), c1);
  ASSERT_TRUE(st->set_head("#" + std::to_string(c2)));  // detached
  EXPECT_EQ(*st->head(), "#" + std::to_string(c2));
  EXPECT_EQ(*st->head_checkpoint(), c2);
  EXPECT_FALSE(st->set_head("#999").is_ok());
  EXPECT_FALSE(st->set_head("#x").is_ok());
  EXPECT_FALSE(st->set_head("").is_ok());
  EXPECT_EQ(*st->head(), "#" + std::to_string(c2));  // failed calls change nothing
  ASSERT_TRUE(st->set_head("new-branch"));           // a branch without a checkpoint yet
  EXPECT_FALSE(st->head_checkpoint()->has_value());

  ASSERT_TRUE(st->delete_ref("try-split-k"));
  EXPECT_FALSE(st->ref("try-split-k")->has_value());
  EXPECT_FALSE(st->delete_ref("try-split-k").is_ok());

  ASSERT_TRUE(st->tag("v1", c1));
  ASSERT_TRUE(st->tag("v1", c1));  // same tag, same checkpoint: fine
  auto moved = st->tag("v1", c2);
  ASSERT_FALSE(moved.is_ok());
  EXPECT_NE(moved.message().find("already names checkpoint"), std::string::npos);
  EXPECT_FALSE(st->tag("v2", 999).is_ok());
  ASSERT_TRUE(st->tag("best", c2));
  EXPECT_EQ(*st->find_tag("v1"), c1);
  EXPECT_FALSE(st->find_tag("v9")->has_value());
  EXPECT_EQ(*st->tags(), (std::map<std::string, int64_t>{{"best", c2}, {"v1", c1}}));

  // Everything survives a reopen.
  st.reset();
  st = open_store(false);
  ASSERT_TRUE(st);
  EXPECT_EQ(*st->head(), "new-branch");
  EXPECT_EQ(*st->ref("main"), c2);
  EXPECT_EQ(*st->find_tag("best"), c2);
}

TEST_F(StoreTest, AppendOnlyTablesRefuseUpdatesAndDeletes) {
  {
    auto st = open_store();
    ASSERT_TRUE(st);
    ASSERT_TRUE(st->add_checkpoint(seed_checkpoint(*st)).is_ok());
    ASSERT_TRUE(st->add_build(BuildRecord{}).is_ok());
    WorkflowRecord w;
    w.kind = "run";
    ASSERT_TRUE(st->add_workflow(w).is_ok());
  }
  int rc = 0;
  std::string err = raw_sql("UPDATE checkpoints SET message = 'rewritten'", &rc);
  EXPECT_NE(rc, SQLITE_OK);
  EXPECT_NE(err.find("append-only"), std::string::npos) << err;
  raw_sql("DELETE FROM builds", &rc);
  EXPECT_NE(rc, SQLITE_OK);
  raw_sql("DELETE FROM workflows", &rc);
  EXPECT_NE(rc, SQLITE_OK);
  raw_sql("UPDATE workflows SET kind = 'x'", &rc);
  EXPECT_NE(rc, SQLITE_OK);
  raw_sql("UPDATE workflows SET status = 'passed'", &rc);  // status and state may change
  EXPECT_EQ(rc, SQLITE_OK);
  EXPECT_EQ(raw_sql("SELECT count(*) FROM builds"), "1");
}

TEST_F(StoreTest, Schema1IsUpgradedThroughEveryStep) {
  std::string summary =
      R"({"disposition":"passed","bench":[{"shape":"M=64","gflops":7.5,"disposition":"passed"}],)"
      R"("device":{"name":"llvmpipe"}})";
  std::string hash = sha256_hex(summary);
  ASSERT_TRUE(write_file(dir_ / "blobs" / hash.substr(0, 2) / hash.substr(2), summary));
  ASSERT_TRUE(write_file(dir_ / "FORMAT", "peak-store 1\n"));
  auto sql = read_file(fs::path(PEAK_SOURCE_DIR) / "src/store/testdata/schema1.sql");
  ASSERT_TRUE(sql) << sql.error();
  raw_sql(replace_all(*sql, "@EVAL_BLOB@", hash));
  ASSERT_EQ(raw_sql("PRAGMA user_version"), "1");

  auto st = open_store(false);
  ASSERT_TRUE(st);
  EXPECT_EQ(raw_sql("PRAGMA user_version"), std::to_string(kStoreSchemaVersion));
  auto ws = st->workflows();
  ASSERT_TRUE(ws);
  ASSERT_EQ(ws->size(), 2u);
  EXPECT_EQ((*ws)[0].status, "passed");  // "done" is spelled "passed" from schema 2 on
  EXPECT_EQ((*ws)[1].status, "running");
  EXPECT_EQ((*ws)[1].owner_pid, 0);  // no owner recorded: a dead owner
  auto ev = st->evaluations(2);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_EQ((*ev)[0].kind, "checkpoint");  // the evaluation recorded with the checkpoint
  EXPECT_DOUBLE_EQ((*ev)[0].gflops, 2.5);
  EXPECT_EQ((*ev)[0].device, "llvmpipe");
  EXPECT_EQ((*ev)[1].kind, "imported");  // the re-evaluation schema 1 kept as eval.2
  EXPECT_DOUBLE_EQ((*ev)[1].gflops, 7.5);
  EXPECT_EQ((*ev)[1].summary_blob, hash);
  EXPECT_TRUE(st->evaluations(1)->empty());  // the seed was never timed
  EXPECT_FALSE(*st->meta("eval.2"));
  EXPECT_EQ(**st->meta("reference.x"), "keep");
  auto at = st->attempts();
  ASSERT_TRUE(at);
  ASSERT_EQ(at->size(), 1u);
  EXPECT_FALSE((*at)[0].infrastructure);
  EXPECT_TRUE(st->stashes()->empty());
  EXPECT_EQ(raw_sql("PRAGMA integrity_check"), "ok");
  int rc = 0;
  raw_sql("DELETE FROM evaluations", &rc);  // the new table is append-only too
  EXPECT_NE(rc, SQLITE_OK);
  // Schema 3: the tuning tables, empty and append-only.
  EXPECT_TRUE(st->tuning_runs()->empty());
  TuningRunRecord run;
  run.checkpoint_id = 2;
  run.strategy = "auto";
  auto r = st->add_tuning_run(run);
  ASSERT_TRUE(r.is_ok()) << r.error();
  raw_sql("DELETE FROM tuning_runs", &rc);
  EXPECT_NE(rc, SQLITE_OK);
}

// A new store's schema text is the one every peak has written (the stores kept under results/
// hold it): tables, columns, indexes and triggers, byte for byte and in the same order, made
// from each table's column list. Compare a failure's text with
// `tar -xJOf results/h100/hip-fp32-whole/store.tar.xz peak.db > /tmp/peak.db` and
// sqlite3 /tmp/peak.db "SELECT sql FROM sqlite_master".
TEST_F(StoreTest, FreshSchemaIsTheRecordedOne) {
  { ASSERT_TRUE(open_store(true)); }
  std::string schema = raw_sql(
      "SELECT group_concat(sql || ';', char(10)) FROM (SELECT sql FROM sqlite_master WHERE sql "
      "IS NOT NULL ORDER BY rowid)");
  EXPECT_EQ(sha256_hex(schema), "f5d11d12357616ff43ee09f1d528f1833d3481d776fe6172c3ae9b3cd8bc3773")
      << schema;
}

TEST_F(StoreTest, AFailedUpgradeChangesNothing) {
  ASSERT_TRUE(write_file(dir_ / "FORMAT", "peak-store 1\n"));
  auto sql = read_file(fs::path(PEAK_SOURCE_DIR) / "src/store/testdata/schema1.sql");
  ASSERT_TRUE(sql);
  raw_sql(replace_all(*sql, "@EVAL_BLOB@", std::string(64, 'a')));
  // A column the upgrade adds already exists: its ALTER TABLE fails half way.
  raw_sql("ALTER TABLE attempts ADD COLUMN infrastructure INTEGER");
  auto st = Store::open(dir_, false);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.error().find("upgrade the schema to version 2"), std::string::npos) << st.error();
  EXPECT_EQ(raw_sql("PRAGMA user_version"), "1");
  EXPECT_EQ(raw_sql("SELECT count(*) FROM sqlite_master WHERE name = 'evaluations'"), "0");
  EXPECT_EQ(raw_sql("SELECT status FROM workflows WHERE id = 1"), "done");
  EXPECT_EQ(raw_sql("SELECT count(*) FROM meta WHERE key = 'eval.2'"), "1");
}

TEST_F(StoreTest, EvaluationsAccumulate) {
  auto st = open_store();
  ASSERT_TRUE(st);
  auto cp = st->add_checkpoint(seed_checkpoint(*st));
  ASSERT_TRUE(cp);
  for (double g : {1.0, std::nan(""), 3.0}) {
    EvaluationRecord e;
    e.checkpoint_id = *cp;
    e.kind = "tune";
    e.options_json = R"({"budget":4})";
    e.standard = g != 3.0;
    e.disposition = std::isnan(g) ? "timeout" : "passed";
    e.shape = "M=64";
    e.gflops = g;
    e.device = "llvmpipe";
    e.summary_blob = *st->put_blob("{}");
    ASSERT_TRUE(st->add_evaluation(e));
  }
  auto ev = st->evaluations(*cp);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 3u);
  EXPECT_TRUE(std::isnan((*ev)[1].gflops));
  EXPECT_FALSE((*ev)[2].standard);
  EXPECT_TRUE(std::regex_match((*ev)[0].created_at, kTimestamp));
  EvaluationRecord bad;
  bad.checkpoint_id = 99;
  bad.kind = "tune";
  EXPECT_FALSE(st->add_evaluation(bad));  // no checkpoint 99
}

TEST_F(StoreTest, StashesAreKeptUntilPoppedOrDropped) {
  auto st = open_store();
  ASSERT_TRUE(st);
  auto cp = st->add_checkpoint(seed_checkpoint(*st));
  ASSERT_TRUE(cp);
  StashRecord r;
  r.base_checkpoint = *cp;
  r.branch = "main";
  r.message = "before checkout seed";
  r.files = {{"kernel.toml", *st->put_blob("toml")}, {"kernel.hlsl", *st->put_blob("src")}};
  auto a = st->add_stash(r);
  auto b = st->add_stash(r);
  ASSERT_TRUE(a && b);
  auto kept = st->stashes();
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->size(), 2u);
  EXPECT_EQ((*kept)[0].files.at("kernel.hlsl"), r.files.at("kernel.hlsl"));
  EXPECT_EQ((*kept)[0].state, "kept");
  ASSERT_TRUE(st->finish_stash(*a, "popped"));
  auto again = st->finish_stash(*a, "dropped");
  EXPECT_FALSE(again);
  EXPECT_EQ(again.kind(), ErrorKind::input);
  EXPECT_EQ(st->stashes()->size(), 1u);
  auto all = st->stashes(false);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].state, "popped");
  EXPECT_FALSE((*all)[0].finished_at.empty());
  EXPECT_FALSE(st->finish_stash(*b, "lost"));
  StashRecord empty;
  EXPECT_FALSE(st->add_stash(empty));
  int rc = 0;
  raw_sql("DELETE FROM stashes", &rc);
  EXPECT_NE(rc, SQLITE_OK);
  raw_sql("UPDATE stashes SET message = 'x'", &rc);
  EXPECT_NE(rc, SQLITE_OK);
}

TEST_F(StoreTest, UpdateRefsIsAllOrNothing) {
  auto st = open_store();
  ASSERT_TRUE(st);
  auto cp = st->add_checkpoint(seed_checkpoint(*st));
  ASSERT_TRUE(cp);
  ASSERT_TRUE(st->set_meta("pending", "x"));
  RefUpdate u;
  u.head = "work";
  u.branches = {{"work", *cp}};
  u.meta = {{"pending", std::nullopt}, {"note", "y"}};
  ASSERT_TRUE(st->update_refs(u));
  EXPECT_EQ(*st->head(), "work");
  EXPECT_EQ(**st->ref("work"), *cp);
  EXPECT_FALSE(*st->meta("pending"));
  EXPECT_EQ(**st->meta("note"), "y");
  RefUpdate bad;
  bad.head = "other";
  bad.branches = {{"other", *cp}, {"broken", 99}};  // no checkpoint 99: nothing happens
  bad.meta = {{"note", "z"}};
  EXPECT_FALSE(st->update_refs(bad));
  EXPECT_EQ(*st->head(), "work");
  EXPECT_FALSE(*st->ref("other"));
  EXPECT_EQ(**st->meta("note"), "y");
}

TEST_F(StoreTest, WorkflowOwnerIsRecordedAndTakenOver) {
  auto st = open_store();
  ASSERT_TRUE(st);
  WorkflowRecord w;
  w.kind = "run";
  w.owner_pid = 42;
  w.owner_host = "box";
  w.owner_start = "2026-01-01T00:00:00.00Z";
  auto id = st->add_workflow(w);
  ASSERT_TRUE(id);
  auto r = st->workflow(*id);
  EXPECT_EQ(r->owner_pid, 42);
  EXPECT_EQ(r->owner_host, "box");
  ASSERT_TRUE(st->set_workflow_owner(*id, 43, "box2", "2026-01-02T00:00:00.00Z"));
  r = st->workflow(*id);
  EXPECT_EQ(r->owner_pid, 43);
  EXPECT_EQ(r->owner_start, "2026-01-02T00:00:00.00Z");
  EXPECT_FALSE(st->set_workflow_owner(999, 1, "", ""));
}

// Runs `body` in a child process without write access to the store: as user nobody when the
// test runs as root (root writes anywhere), after removing the write permissions. Returns the
// child's exit code.
int without_write_access(const fs::path& root, const std::function<int()>& body) {
  std::error_code ec;
  fs::permissions(root,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); ++it)
    fs::permissions(it->path(),
                    fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove, ec);
  pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(90);
    _exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); ++it)
    fs::permissions(it->path(), fs::perms::owner_write, fs::perm_options::add, ec);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST_F(StoreTest, ReadOnlyWorkspaceCanBeRead) {
  {
    auto st = open_store();
    ASSERT_TRUE(st);
    ASSERT_TRUE(st->add_checkpoint(seed_checkpoint(*st)));
  }  // closed cleanly: no -wal or -shm file is left
  for (bool writer_open : {false, true}) {
    SCOPED_TRACE(writer_open ? "another process has it open" : "closed");
    std::unique_ptr<Store> writer;
    if (writer_open) writer = open_store(false);
    int rc = without_write_access(root_, [&] {
      auto st = Store::open(dir_, false);
      if (!st) {
        std::fprintf(stderr, "%s\n", st.error().c_str());
        return 1;
      }
      if (!(*st)->read_only()) return 2;
      auto cps = (*st)->checkpoints();
      if (!cps || cps->size() != 1) return 3;
      auto put = (*st)->put_blob("x");
      if (put || put.error().find("read-only") == std::string::npos) return 4;
      WorkflowRecord wr;
      wr.kind = "run";
      auto w = (*st)->add_workflow(wr);
      if (w || w.error().find("read-only") == std::string::npos ||
          w.error_kind() != ErrorKind::environment) {
        std::fprintf(stderr, "%s\n", w ? "written" : w.error().c_str());
        return 5;
      }
      return 0;
    });
    EXPECT_EQ(rc, 0);
  }
}

TEST_F(StoreTest, ConcurrentBuildsFromFourThreads) {
  auto st = open_store();
  ASSERT_TRUE(st);
  constexpr int kThreads = 4, kPerThread = 150;
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        BuildRecord b;
        b.config_json = "{\"thread\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) + "}";
        auto h = st->put_blob("shared log");
        if (!h) {
          errors[t] = h.error();
          return;
        }
        b.log_blob = *h;
        auto r = st->add_build(b);
        if (!r) {
          errors[t] = r.error();
          return;
        }
        ids[t].push_back(*r);
        if (i % 50 == 0) (void)st->builds();  // readers interleave with writers
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_EQ(ids[t].size(), size_t{kPerThread});
    all.insert(ids[t].begin(), ids[t].end());
  }
  EXPECT_EQ(all.size(), size_t{kThreads * kPerThread});
  auto rows = st->builds();
  ASSERT_TRUE(rows.is_ok()) << rows.error();
  ASSERT_EQ(rows->size(), size_t{kThreads * kPerThread});
  for (const auto& b : *rows) EXPECT_TRUE(all.count(b.id));
  EXPECT_EQ(*st->get_blob(sha256_hex("shared log")), "shared log");
}

// A child process writes rows in a loop and reports each committed id through a pipe; it is
// killed with SIGKILL at a random moment. Every reported row must survive.
struct Committed {
  int64_t kind;  // 0 build, 1 checkpoint, 2 workflow state
  int64_t id;
};

[[noreturn]] void crash_child(const std::filesystem::path& dir, int fd) {
  auto st = Store::open(dir, false);
  if (!st) _exit(3);
  Store& s = **st;
  WorkflowRecord w;
  w.kind = "run";
  auto wf = s.add_workflow(w);
  if (!wf) _exit(4);
  for (int64_t i = 0;; ++i) {
    Committed c{};
    if (i % 16 == 15) {
      CheckpointRecord cp;
      cp.branch = "main";
      cp.message = "step " + std::to_string(i);
      auto blob = s.put_blob("source " + std::to_string(i));
      if (!blob) _exit(9);
      cp.source_blob = *blob;
      auto r = s.add_checkpoint(cp);
      if (!r || !s.set_ref("main", *r)) _exit(5);
      c = {1, *r};
    } else if (i % 16 == 7) {
      if (!s.update_workflow(*wf, "running", std::to_string(i))) _exit(6);
      c = {2, i};
    } else {
      BuildRecord b;
      b.config_json = std::to_string(i);
      auto blob = s.put_blob("log " + std::to_string(i));
      if (!blob) _exit(9);
      b.log_blob = *blob;
      auto r = s.add_build(b);
      if (!r) _exit(7);
      c = {0, *r};
    }
    if (::write(fd, &c, sizeof c) != sizeof c) _exit(8);
  }
}

TEST_F(StoreTest, KillNineLosesNoCommittedRow) {
  { ASSERT_TRUE(open_store(true)); }
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      crash_child(dir_, fds[1]);
    }
    ::close(fds[1]);
    std::vector<Committed> seen;
    auto drain = [&](int timeout_ms) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      Committed buf[256];
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) return false;
      // Writes of one record are atomic (smaller than PIPE_BUF), so reads split only between
      // records.
      seen.insert(seen.end(), buf, buf + n / static_cast<ssize_t>(sizeof(Committed)));
      return true;
    };
    using clock = std::chrono::steady_clock;
    auto start = clock::now();
    while (seen.empty() && clock::now() - start < std::chrono::seconds(5)) drain(50);
    auto kill_at = clock::now() + std::chrono::milliseconds(30 + rng() % 50);
    while (clock::now() < kill_at) drain(1);
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    while (drain(100)) {
    }
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the writer exited on its own with status " << WEXITSTATUS(status);
    ASSERT_FALSE(seen.empty()) << "the writer committed nothing before it was killed";

    auto st = open_store(false);
    ASSERT_TRUE(st);
    EXPECT_EQ(raw_sql("PRAGMA integrity_check"), "ok");
    std::set<int64_t> builds, checkpoints;
    auto build_rows = st->builds();
    auto checkpoint_rows = st->checkpoints();
    ASSERT_TRUE(build_rows.is_ok()) << build_rows.error();
    ASSERT_TRUE(checkpoint_rows.is_ok()) << checkpoint_rows.error();
    for (const auto& b : *build_rows) builds.insert(b.id);
    for (const auto& c : *checkpoint_rows) checkpoints.insert(c.id);
    int64_t last_state = -1, last_checkpoint = -1;
    for (const auto& c : seen) {
      if (c.kind == 0) {
        EXPECT_TRUE(builds.count(c.id)) << "build " << c.id << " lost";
      }
      if (c.kind == 1) {
        EXPECT_TRUE(checkpoints.count(c.id)) << "checkpoint " << c.id << " lost";
        last_checkpoint = c.id;
      }
      if (c.kind == 2) last_state = c.id;
    }
    if (last_checkpoint > 0) {
      auto main = st->ref("main");
      ASSERT_TRUE(main->has_value());
      EXPECT_GE(**main, last_checkpoint);
    }
    if (last_state >= 0) {
      auto wfs = *st->workflows();
      ASSERT_FALSE(wfs.empty());
      EXPECT_GE(std::stoll(wfs.back().state_json), last_state);
    }
    for (const auto& b : *build_rows) {
      if (!b.log_blob.empty()) {
        EXPECT_TRUE(st->get_blob(b.log_blob).is_ok()) << b.log_blob;
      }
    }
  }
}

}  // namespace
}  // namespace peak
