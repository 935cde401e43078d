// Atomicity of save_checkpoint over four thread "ranks": a failure injected at every stage, a real
// write failure (file size limit), an unwritable directory and a full disk each make every rank
// throw and leave `latest` on a loadable previous step; keep_last pruning; crash leftovers.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <set>

#include "checkpoint_test_util.h"
#include "runtime/error.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/format.h"

namespace trainer::checkpoint_test {
namespace {

using runtime::DType;
constexpr int kRanks = 4;

// The (8, 6) tensor a step saves: values depend on the step, so a read shows which step it got.
std::vector<float> step_values(int64_t step) {
  return distinct_values(8 * 6, 100.f * static_cast<float>(step));
}

// Installs a fault hook that fails `rank` at `stage`; removes it when destroyed.
class InjectedFault {
 public:
  InjectedFault(const std::string& stage, int rank) {
    checkpoint::set_fault_hook_for_testing([stage, rank](std::string_view at, int caller) {
      if (at == stage && caller == rank)
        throw runtime::LibraryError("injected failure at " + std::string(at));
    });
  }
  ~InjectedFault() { checkpoint::set_fault_hook_for_testing(nullptr); }
  InjectedFault(const InjectedFault&) = delete;
  InjectedFault& operator=(const InjectedFault&) = delete;
};

// Every rank saves two rows of "param/w" (a tp4 split along dim 0); returns each rank's error.
std::vector<std::exception_ptr> save_step(const std::string& dir, int64_t step, int keep_last = 0,
                                          int64_t extra_bytes_on_rank2 = 0) {
  const std::vector<float> full = step_values(step);
  return run_ranks(kRanks, [&](int rank, parallel::Communicator& world) {
    const ShardSlice rows{0, 2 * rank, 2};
    const std::vector<float> local = reference_slice(full, {8, 6}, rows);
    std::vector<TensorShard> shards = {{"param/w", {8, 6}, rows, DType::f32, local.data()}};
    std::vector<uint8_t> padding(rank == 2 ? static_cast<size_t>(extra_bytes_on_rank2) : 0, 7);
    if (!padding.empty())
      shards.push_back(
          {"state/padding", {static_cast<int64_t>(padding.size())}, {}, DType::u8, padding.data()});
    CheckpointMeta meta;
    meta.step = step;
    meta.tensor = kRanks;
    save_checkpoint(dir, meta, shards, true, keep_last, world);
  });
}

void expect_all_succeeded(const std::vector<std::exception_ptr>& errors) {
  for (size_t rank = 0; rank < errors.size(); ++rank)
    EXPECT_FALSE(errors[rank]) << "rank " << rank << ": " << message_of(errors[rank]);
}

// Every rank threw; the failing rank its own error containing `cause`, the others a message
// naming the failing rank.
void expect_all_failed(const std::vector<std::exception_ptr>& errors, int failing_rank,
                       const std::string& cause) {
  for (int rank = 0; rank < static_cast<int>(errors.size()); ++rank) {
    const std::string message = message_of(errors[static_cast<size_t>(rank)]);
    ASSERT_FALSE(message.empty()) << "rank " << rank << " did not throw";
    if (rank == failing_rank)
      EXPECT_NE(message.find(cause), std::string::npos) << message;
    else
      EXPECT_NE(message.find("failed on rank(s) " + std::to_string(failing_rank)),
                std::string::npos)
          << message;
  }
}

// `step_dir` holds exactly the values of `step`.
void expect_loads(const std::string& step_dir, int64_t step) {
  const CheckpointReader reader(step_dir);
  EXPECT_EQ(reader.meta().step, step);
  std::vector<float> out(8 * 6);
  reader.read("param/w", {8, 6}, {}, DType::f32, out.data());
  EXPECT_EQ(out, step_values(step)) << step_dir;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

TEST_F(CheckpointTest, FailureAtAnyStageKeepsThePreviousCheckpoint) {
  expect_all_succeeded(save_step(root_.string(), 1));
  const struct {
    const char* stage;
    int rank;
  } faults[] = {{"prepared", 3}, {"rank_file_written", 2}, {"manifest_written", 0}, {"renamed", 0}};
  for (const auto& fault : faults) {
    SCOPED_TRACE(fault.stage);
    {
      const InjectedFault injected(fault.stage, fault.rank);
      expect_all_failed(save_step(root_.string(), 2), fault.rank,
                        std::string("injected failure at ") + fault.stage);
    }
    EXPECT_EQ(read_text(path("latest")), "step_00000001\n");
    EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000001"));
    expect_loads(path("step_00000001"), 1);
    EXPECT_FALSE(fs::exists(path("step_00000002.tmp")));
    // After the rename step 2 is complete but unpublished; before it, it does not exist.
    if (std::string(fault.stage) == "renamed")
      expect_loads(path("step_00000002"), 2);
    else
      EXPECT_FALSE(fs::exists(path("step_00000002")));

    expect_all_succeeded(
        save_step(root_.string(), 2));  // recovers, replacing an unpublished step 2
    EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000002"));
    expect_loads(path("step_00000002"), 2);
    EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000001", "step_00000002"}));
    fs::remove_all(path("step_00000002"));
    const std::string back_to_step_1 = "step_00000001\n";
    write_bytes(path("latest"), {back_to_step_1.begin(), back_to_step_1.end()});
  }
}

TEST_F(CheckpointTest, FailureAfterLatestStillLeavesALoadableCheckpoint) {
  expect_all_succeeded(save_step(root_.string(), 1));
  {
    const InjectedFault injected("latest_written", 0);
    expect_all_failed(save_step(root_.string(), 2), 0, "injected failure at latest_written");
  }
  EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000002"));
  expect_loads(path("step_00000002"), 2);
  expect_loads(path("step_00000001"), 1);
}

TEST_F(CheckpointTest, RealWriteFailureOnOneRankFailsEveryRank) {
  expect_all_succeeded(save_step(root_.string(), 1));
  // A 1 MiB file size limit makes rank 2's 2 MiB file fail with EFBIG (SIGXFSZ ignored).
  rlimit saved_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  const auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small_limit = saved_limit;
  small_limit.rlim_cur = 1 << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small_limit), 0);
  const auto errors = save_step(root_.string(), 2, 0, 2 << 20);
  ::setrlimit(RLIMIT_FSIZE, &saved_limit);
  std::signal(SIGXFSZ, saved_handler);

  expect_all_failed(errors, 2, path("step_00000002.tmp/rank_00002.bin"));
  EXPECT_NE(message_of(errors[2]).find(std::strerror(EFBIG)), std::string::npos)
      << message_of(errors[2]);
  EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000001"));
  expect_loads(path("step_00000001"), 1);
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000001"}));
}

TEST_F(CheckpointTest, UnwritableDirectoryFailsEveryRank) {
  write_bytes(path("plain_file"), {'x'});
  const std::string dir = path("plain_file/checkpoints");
  const auto errors = save_step(dir, 1);
  expect_all_failed(errors, 0, dir);
  EXPECT_NE(message_of(errors[0]).find(std::strerror(ENOTDIR)), std::string::npos)
      << message_of(errors[0]);
  try {
    std::rethrow_exception(errors[0]);
  } catch (const runtime::InputError&) {
  } catch (...) {
    ADD_FAILURE() << "rank 0 should throw InputError for an unusable directory";
  }
}

TEST_F(CheckpointTest, CallerBugOnOneRankFailsEveryRank) {
  expect_all_succeeded(save_step(root_.string(), 1));
  const std::vector<float> values = distinct_values(12, 0.f);
  const auto errors = run_ranks(kRanks, [&](int rank, parallel::Communicator& world) {
    // Rank 1 is a replica (writes_shards false) yet passes a shard: an internal assert.
    const std::vector<TensorShard> shards = {{"param/v", {12}, {}, DType::f32, values.data()}};
    CheckpointMeta meta;
    meta.step = 2;
    save_checkpoint(root_.string(), meta, shards, rank != 1, 0, world);
  });
  expect_all_failed(errors, 1, "a rank that does not write shards passed 1");
  EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000001"));
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000001"}));
}

TEST_F(CheckpointTest, FullDiskThrowsNamingThePathAndErrno) {
  // /dev/full accepts open() and fails every write() with ENOSPC.
  for (const int64_t count : {int64_t{16}, int64_t{3} << 20}) {  // buffered and direct writes
    const std::vector<float> values(static_cast<size_t>(count), 1.f);
    const std::vector<TensorShard> shards = {{"param/x", {count}, {}, DType::f32, values.data()}};
    try {
      checkpoint::write_rank_file("/dev/full", 0, shards);
      ADD_FAILURE() << "writing to /dev/full succeeded";
    } catch (const runtime::LibraryError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("/dev/full"), std::string::npos) << message;
      EXPECT_NE(message.find(std::strerror(ENOSPC)), std::string::npos) << message;
    }
  }
}

TEST_F(CheckpointTest, KeepLastPrunesOnlyOlderSteps) {
  for (int64_t step = 1; step <= 5; ++step)
    expect_all_succeeded(save_step(root_.string(), step, 2));
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000004", "step_00000005"}));
  expect_all_succeeded(save_step(root_.string(), 6, 0));  // 0 keeps everything
  EXPECT_EQ(entries(root_),
            (std::set<std::string>{"latest", "step_00000004", "step_00000005", "step_00000006"}));
  // Saving an older step (a run resumed from it) never deletes steps numbered above it.
  expect_all_succeeded(save_step(root_.string(), 3, 1));
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000003", "step_00000004",
                                                   "step_00000005", "step_00000006"}));
  EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000003"));
  expect_all_succeeded(save_step(root_.string(), 7, 1));
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000007"}));
  expect_loads(path("step_00000007"), 7);
}

TEST_F(CheckpointTest, CrashLeftoversAreIgnoredAndCleanedByTheNextSave) {
  expect_all_succeeded(save_step(root_.string(), 1));
  // What a crash can leave: a half-written step, a displaced old step, a half-written latest.
  fs::create_directories(path("step_00000002.tmp"));
  write_bytes(path("step_00000002.tmp/rank_00000.bin"), {'p', 'a', 'r', 't'});
  write_bytes(path("step_00000002.tmp/manifest.json"), {'{', '"'});
  fs::create_directories(path("step_00000009.tmp"));
  fs::create_directories(path("step_00000004.old.tmp"));
  write_bytes(path("latest.tmp"), {'s', 't'});
  EXPECT_EQ(find_checkpoint(root_.string(), "auto"), path("step_00000001"));
  expect_loads(path("step_00000001"), 1);

  expect_all_succeeded(save_step(root_.string(), 2));
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000001", "step_00000002"}));
  expect_loads(path("step_00000002"), 2);
}

TEST_F(CheckpointTest, SavingThePublishedStepAgainReplacesIt) {
  expect_all_succeeded(save_step(root_.string(), 3));
  // Same step number, other values: the meta step stays 3 but the data must be the new one.
  const std::vector<float> newer = step_values(30);
  const auto errors = run_ranks(kRanks, [&](int rank, parallel::Communicator& world) {
    const ShardSlice rows{0, 2 * rank, 2};
    const std::vector<float> local = reference_slice(newer, {8, 6}, rows);
    CheckpointMeta meta;
    meta.step = 3;
    save_checkpoint(root_.string(), meta, {{"param/w", {8, 6}, rows, DType::f32, local.data()}},
                    true, 0, world);
  });
  expect_all_succeeded(errors);
  EXPECT_EQ(entries(root_), (std::set<std::string>{"latest", "step_00000003"}));
  const CheckpointReader reader(*find_checkpoint(root_.string(), "auto"));
  std::vector<float> out(8 * 6);
  reader.read("param/w", {8, 6}, {}, DType::f32, out.data());
  EXPECT_EQ(out, newer);
}

TEST_F(CheckpointTest, FindCheckpointResolvesAndValidates) {
  EXPECT_EQ(find_checkpoint(path("nowhere"), "auto"), std::nullopt);
  expect_all_succeeded(save_step(root_.string(), 1));
  EXPECT_EQ(find_checkpoint(root_.string(), path("step_00000001")), path("step_00000001"));
  EXPECT_EQ(find_checkpoint(root_.string(), "step_00000001"), path("step_00000001"));
  EXPECT_THROW(find_checkpoint(root_.string(), "step_00000099"), runtime::InputError);

  const auto expect_error = [&](const std::string& which, const std::string& text) {
    try {
      find_checkpoint(root_.string(), which);
      ADD_FAILURE() << "accepted " << which;
    } catch (const runtime::InputError& error) {
      EXPECT_NE(std::string(error.what()).find(text), std::string::npos) << error.what();
    }
  };
  fs::copy(path("step_00000001"), path("step_00000005"));  // a directory whose manifest says 1
  expect_error("step_00000005", "records step 1 but the directory is step 5");
  write_bytes(path("latest"), {'s', 't', 'e', 'p', '_', '7', '\n'});
  expect_error("auto", path("latest") + ": names " + path("step_7") + ", which does not exist");
  write_bytes(path("latest"), {'.', '.', '/', 'x'});
  expect_error("auto", "does not name a step directory");
}

}  // namespace
}  // namespace trainer::checkpoint_test
