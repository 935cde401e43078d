// Test helpers for checkpoints: a per-test temporary directory, a Communicator whose N ranks are
// N threads of this process (so save_checkpoint runs its real collective protocol), and a
// reference slicer written independently of the reader's box copy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "parallel/core/communicator.h"
#include "tests/support/temp_dir_test.h"
#include "trainer/checkpoint/checkpoint.h"

namespace trainer::checkpoint_test {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class CheckpointTest : public test_support::TempDirTest {
 protected:
  CheckpointTest() : TempDirTest("trainer_checkpoint_") {}
};

// The shared state of N thread "ranks". Collectives meet at a barrier and move data through the
// pointers each rank deposits in `slots`; point-to-point messages go through a locked mailbox.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size)
      : size_(size), sync_(size), slots_(static_cast<size_t>(size), nullptr) {}
  int size() const { return size_; }

  // out = combine over ranks (in rank order, so every rank gets identical bits) of each slot.
  template <typename T, typename Combine>
  void all_reduce(int rank, T* data, int64_t count, const Combine& combine) {
    slots_[static_cast<size_t>(rank)] = data;
    sync_.arrive_and_wait();
    std::vector<T> result(static_cast<T*>(slots_[0]), static_cast<T*>(slots_[0]) + count);
    for (size_t other = 1; other < slots_.size(); ++other)
      for (int64_t i = 0; i < count; ++i)
        result[static_cast<size_t>(i)] =
            combine(result[static_cast<size_t>(i)], static_cast<T*>(slots_[other])[i]);
    sync_.arrive_and_wait();
    std::memcpy(data, result.data(), sizeof(T) * static_cast<size_t>(count));
  }

  void all_gather(int rank, float* out, const float* in, int64_t count) {
    slots_[static_cast<size_t>(rank)] = const_cast<float*>(in);
    sync_.arrive_and_wait();
    for (size_t other = 0; other < slots_.size(); ++other)
      std::memcpy(out + static_cast<int64_t>(other) * count, slots_[other],
                  sizeof(float) * static_cast<size_t>(count));
    sync_.arrive_and_wait();
  }

  void reduce_scatter(int rank, float* out, const float* in, int64_t count) {
    slots_[static_cast<size_t>(rank)] = const_cast<float*>(in);
    sync_.arrive_and_wait();
    for (int64_t i = 0; i < count; ++i) {
      float sum = 0.f;
      for (void* slot : slots_) sum += static_cast<const float*>(slot)[rank * count + i];
      out[i] = sum;
    }
    sync_.arrive_and_wait();
  }

  void broadcast(int rank, void* data, int64_t bytes, int root) {
    if (rank == root) slots_[static_cast<size_t>(root)] = data;
    sync_.arrive_and_wait();
    if (rank != root)
      std::memcpy(data, slots_[static_cast<size_t>(root)], static_cast<size_t>(bytes));
    sync_.arrive_and_wait();
  }

  void barrier() { sync_.arrive_and_wait(); }

  // Eager sends: the bytes are copied into the mailbox, so the send completes at once.
  void send(int from, int to, int tag, const void* data, int64_t bytes) {
    const auto* first = static_cast<const char*>(data);
    {
      const std::lock_guard<std::mutex> lock(mailbox_mutex_);
      mailbox_[{from, to, tag}].emplace_back(first, first + bytes);
    }
    mailbox_changed_.notify_all();
  }

  void recv(int from, int to, int tag, void* data, int64_t bytes) {
    std::unique_lock<std::mutex> lock(mailbox_mutex_);
    std::deque<std::vector<char>>& queue = mailbox_[{from, to, tag}];
    mailbox_changed_.wait(lock, [&] { return !queue.empty(); });
    ASSERT_EQ(static_cast<int64_t>(queue.front().size()), bytes) << "message size";
    std::memcpy(data, queue.front().data(), static_cast<size_t>(bytes));
    queue.pop_front();
  }

 private:
  int size_;
  std::barrier<> sync_;
  std::vector<void*> slots_;
  std::mutex mailbox_mutex_;
  std::condition_variable mailbox_changed_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mailbox_;  // (from, to, tag)
};

class CompletedRequest final : public parallel::Request {
 public:
  void wait() override {}
};

class ThreadCommunicator final : public parallel::Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }

 private:
  // f32 only (the checkpoint code reduces nothing else).
  void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) override {
    require_f32(dtype);
    group_.all_reduce(rank_, static_cast<float*>(data), count,
                      [](float a, float b) { return a + b; });
  }
  void do_all_reduce_sum_f64_buffer(double* data, int64_t count) override {
    group_.all_reduce(rank_, data, count, [](double a, double b) { return a + b; });
  }
  void do_all_reduce_max_buffer(float* data, int64_t count) override {
    group_.all_reduce(rank_, data, count, [](float a, float b) { return std::max(a, b); });
  }
  void do_all_gather_buffer(void* out, const void* in, int64_t count,
                            runtime::DType dtype) override {
    require_f32(dtype);
    group_.all_gather(rank_, static_cast<float*>(out), static_cast<const float*>(in), count);
  }
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                runtime::DType dtype) override {
    require_f32(dtype);
    group_.reduce_scatter(rank_, static_cast<float*>(out), static_cast<const float*>(in), count);
  }
  void do_broadcast(void* data, int64_t bytes, int root) override {
    group_.broadcast(rank_, data, bytes, root);
  }
  void do_barrier() override { group_.barrier(); }
  std::unique_ptr<parallel::Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,
                                                          int tag) override {
    group_.send(rank_, peer, tag, data, bytes);
    return std::make_unique<CompletedRequest>();
  }
  void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) override {
    group_.recv(peer, rank_, tag, data, bytes);
  }

  static void require_f32(runtime::DType dtype) {
    TRAINER_ASSERT(dtype == runtime::DType::f32, "ThreadCommunicator reduces f32 only");
  }
  ThreadGroup& group_;
  int rank_;
};

// Runs body(rank, world) on `size` threads; returns each rank's exception (null when it returned).
inline std::vector<std::exception_ptr> run_ranks(
    int size, const std::function<void(int rank, parallel::Communicator& world)>& body) {
  ThreadGroup group(size);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      ThreadCommunicator world(group, rank);
      try {
        body(rank, world);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  for (std::thread& thread : threads) thread.join();
  return errors;
}

// The message of an exception, "" for none.
inline std::string message_of(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    return caught.what();
  } catch (...) {
    return "(not a std::exception)";
  }
}

// Distinct float values: every element of every test tensor differs, so a misplaced copy shows.
inline std::vector<float> distinct_values(int64_t count, float base) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[static_cast<size_t>(i)] = base + 0.25f * static_cast<float>(i);
  return values;
}

// Reference slicing: walks every global index and keeps those inside the slice (row-major).
template <typename T>
std::vector<T> reference_slice(const std::vector<T>& full, const std::vector<int64_t>& shape,
                               const ShardSlice& slice) {
  std::vector<T> out;
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t flat = 0; flat < full.size(); ++flat) {
    if (slice.dim < 0 || (index[static_cast<size_t>(slice.dim)] >= slice.offset &&
                          index[static_cast<size_t>(slice.dim)] < slice.offset + slice.length))
      out.push_back(full[flat]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

inline std::vector<char> read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_text(const std::string& file) {
  const std::vector<char> bytes = read_bytes(file);
  return {bytes.begin(), bytes.end()};
}

}  // namespace trainer::checkpoint_test
