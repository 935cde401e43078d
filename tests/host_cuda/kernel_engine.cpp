// Host CUDA's kernel engine: the threads of a block as fibers (fiber_switch.h) run warp by warp
// in the schedule's order, block barriers, warp collectives, the refill of shared memory and
// the launch checks of Note [Host CUDA].
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/host_cuda/fiber_switch.h"
#include "tests/host_cuda/host_cuda.h"
#include "tests/host_cuda/host_cuda_state.h"
#include "tests/host_cuda/stream_work.h"

// The bounds of every kernel's static __shared__ variables (host_cuda.h puts them in one
// section; the linker defines these for a section named like an identifier).
extern "C" {
extern unsigned char __start_host_cuda_shared[] __attribute__((weak));
extern unsigned char __stop_host_cuda_shared[] __attribute__((weak));
}

namespace host_cuda {
namespace {

constexpr int kWarpLanes = 32;
constexpr size_t kStackBytes = size_t{256} << 10;
constexpr unsigned char kUnwrittenShared = 0xA5;

// A barrier over `live` members: arrivals count up; the last one opens the next generation.
struct Barrier {
  int live = 0;
  int arrived = 0;
  unsigned generation = 0;
  bool complete() const { return arrived > 0 && arrived == live; }
  void open() { arrived = 0, ++generation; }
};

struct WarpState {
  Barrier barrier;
  uint64_t slots[kWarpLanes] = {};
  uint32_t a[kWarpLanes][4] = {};
  uint32_t b[kWarpLanes][2] = {};
};

// One fiber's stack with a guard page below it (an overflow faults instead of corrupting).
class Stack {
 public:
  Stack() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = kStackBytes + page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::runtime_error("host CUDA: cannot map a fiber stack");
    mprotect(base, page, PROT_NONE);
    base_ = static_cast<char*>(base);
    page_ = page;
  }
  ~Stack() { munmap(base_, bytes_); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  char* bottom() const { return base_ + page_; }
  size_t size() const { return kStackBytes; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t page_ = 0;
};

struct Fiber {
  FiberContext context;
  uint3 index{};
  int warp = 0;
  bool done = false;
  const Barrier* waiting = nullptr;  // the barrier it waits at, while that generation lasts
  unsigned generation = 0;
  bool runnable() const {
    return !done && (waiting == nullptr || waiting->generation != generation);
  }
};

// The block being run on this host thread.
struct BlockRun {
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  Barrier block;
  int current = -1;
  FiberContext scheduler;
  uint3 block_index{};
  dim3 block_dim{};
  dim3 grid_dim{};
  unsigned char* shared = nullptr;
  std::exception_ptr failure;  // thrown by a thread: ends the launch, rethrown by run_grid
};

thread_local BlockRun* t_run = nullptr;
thread_local std::vector<std::unique_ptr<Stack>> t_stacks;

Schedule schedule_from_environment() {
  const char* value = std::getenv("HOST_CUDA_SCHEDULE");
  if (value == nullptr || std::string(value) == "forward") return Schedule::forward;
  if (std::string(value) == "reverse") return Schedule::reverse;
  throw std::invalid_argument(std::string("host CUDA: HOST_CUDA_SCHEDULE is '") + value +
                              "'; expected 'forward' or 'reverse'");
}

Schedule& current_schedule() {
  static Schedule schedule = schedule_from_environment();
  return schedule;
}

// The i-th of n (threads or blocks) in the schedule's order.
uint64_t scheduled(uint64_t i, uint64_t n) {
  return current_schedule() == Schedule::forward ? i : n - 1 - i;
}

BlockRun& run() {
  if (t_run == nullptr) throw std::logic_error("host CUDA: a device built-in outside a kernel");
  return *t_run;
}
Fiber& self() {
  BlockRun& r = run();
  return r.fibers[static_cast<size_t>(r.current)];
}

void yield() {
  BlockRun& r = run();
  switch_fiber(r.fibers[static_cast<size_t>(r.current)].context, r.scheduler);
}

// Arrives at `barrier` and returns once it opens.
void wait_at(Barrier& barrier) {
  ++barrier.arrived;
  if (barrier.complete()) {
    barrier.open();
    return;
  }
  Fiber& me = self();
  me.waiting = &barrier;
  me.generation = barrier.generation;
  while (barrier.generation == me.generation) yield();
  me.waiting = nullptr;
}

void fiber_main() {
  BlockRun& r = run();
  try {
    (*r.body)();
  } catch (...) {
    if (!r.failure) r.failure = std::current_exception();
  }
  Fiber& me = self();
  me.done = true;
  WarpState& warp = r.warps[static_cast<size_t>(me.warp)];
  --r.block.live;
  --warp.barrier.live;
  if (r.block.complete()) r.block.open();
  if (warp.barrier.complete()) warp.barrier.open();
  switch_fiber(me.context, r.scheduler);  // never resumed
}

// The bf16 in the low (half 0) or high (half 1) 16 bits of a register, as a float.
float bf16_half(uint32_t reg, int half) {
  const uint32_t bits = half == 0 ? (reg & 0xffffu) << 16 : reg & 0xffff0000u;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

std::string describe(const LaunchShape& shape) {
  auto dims = [](const dim3& d) {
    return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) +
           ")";
  };
  return "grid " + dims(shape.grid) + " block " + dims(shape.block) + " shared " +
         std::to_string(shape.shared_bytes) + " B";
}

void prepare_fibers(BlockRun& r, unsigned threads) {
  while (t_stacks.size() < threads) t_stacks.push_back(std::make_unique<Stack>());
  r.fibers.assign(threads, Fiber{});
  r.warps.assign((threads + kWarpLanes - 1) / kWarpLanes, WarpState{});
  r.block = Barrier{static_cast<int>(threads), 0, 0};
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = r.fibers[t];
    f.index = uint3{t % r.block_dim.x, (t / r.block_dim.x) % r.block_dim.y,
                    t / (r.block_dim.x * r.block_dim.y)};
    f.warp = static_cast<int>(t) / kWarpLanes;
    ++r.warps[static_cast<size_t>(f.warp)].barrier.live;
    prepare_fiber(f.context, t_stacks[t]->bottom(), t_stacks[t]->size(), fiber_main);
  }
}

// Runs the warps in the schedule's order, each as far as it can go (until its lanes wait at
// the block barrier or are done), its lanes taking turns between warp collectives, until every
// fiber is done.
void run_block(BlockRun& r, const LaunchShape& shape) {
  const unsigned threads = r.block_dim.x * r.block_dim.y * r.block_dim.z;
  prepare_fibers(r, threads);
  const auto warps = static_cast<unsigned>(r.warps.size());
  for (bool ran = true; ran;) {
    ran = false;
    for (unsigned w = 0; w < warps; ++w) {
      const unsigned first = static_cast<unsigned>(scheduled(w, warps)) * kWarpLanes;
      const unsigned lanes = std::min<unsigned>(kWarpLanes, threads - first);
      for (bool warp_ran = true; warp_ran;) {
        warp_ran = false;
        for (unsigned i = 0; i < lanes; ++i) {
          const auto t = first + static_cast<unsigned>(scheduled(i, lanes));
          if (!r.fibers[t].runnable()) continue;
          r.current = static_cast<int>(t);
          switch_fiber(r.scheduler, r.fibers[t].context);
          r.current = -1;
          if (r.failure) std::rethrow_exception(r.failure);
          warp_ran = ran = true;
        }
      }
    }
  }
  if (std::any_of(r.fibers.begin(), r.fibers.end(), [](const Fiber& f) { return !f.done; })) {
    throw std::runtime_error("host CUDA: the threads of block (" + std::to_string(r.block_index.x) +
                             ", " + std::to_string(r.block_index.y) + ", " +
                             std::to_string(r.block_index.z) + ") of " + describe(shape) +
                             " wait at barriers none of them can pass (deadlock)");
  }
}

void require_full_mask(unsigned mask, const char* what) {
  if (mask != 0xffffffffu)
    throw std::runtime_error(std::string("host CUDA: ") + what +
                             " with a partial lane mask is not emulated");
}

// The launch error the device would report for `shape`, or cudaSuccess.
cudaError_t check_shape(const LaunchShape& shape) {
  const unsigned threads = shape.block.x * shape.block.y * shape.block.z;
  if (threads == 0 || threads > kMaxBlockThreads || shape.block.z > kMaxBlockZ)
    return cudaErrorInvalidConfiguration;
  if (shape.grid.x == 0 || shape.grid.y == 0 || shape.grid.z == 0 || shape.grid.y > kMaxGridYZ ||
      shape.grid.z > kMaxGridYZ)
    return cudaErrorInvalidConfiguration;
  const size_t allowed = std::max(kDefaultSharedBytes, opted_in_shared_bytes(shape.kernel));
  if (shape.shared_bytes > allowed) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

Schedule schedule() {
  return current_schedule();
}
void set_schedule(Schedule schedule) {
  current_schedule() = schedule;
}

const uint3& thread_index() {
  return self().index;
}
const uint3& block_index() {
  return run().block_index;
}
const dim3& block_dim() {
  return run().block_dim;
}
const dim3& grid_dim() {
  return run().grid_dim;
}
unsigned char* dynamic_shared_memory() {
  return run().shared;
}

void sync_block() {
  wait_at(run().block);
}

void sync_warp(unsigned mask) {
  require_full_mask(mask, "__syncwarp");
  wait_at(run().warps[static_cast<size_t>(self().warp)].barrier);
}

uint64_t warp_exchange(unsigned mask, uint64_t value, int source) {
  require_full_mask(mask, "a warp shuffle");
  const int lane = static_cast<int>(thread_index().x) % kWarpLanes;
  WarpState& warp = run().warps[static_cast<size_t>(self().warp)];
  warp.slots[lane] = value;
  wait_at(warp.barrier);
  const uint64_t result = warp.slots[source & (kWarpLanes - 1)];
  wait_at(warp.barrier);  // every lane has read before any writes again
  return result;
}

void warp_mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = static_cast<int>(thread_index().x) % kWarpLanes;
  WarpState& warp = run().warps[static_cast<size_t>(self().warp)];
  std::copy(a, a + 4, warp.a[lane]);
  std::copy(b, b + 2, warp.b[lane]);
  wait_at(warp.barrier);
  // PTX ISA fragments: group g = lane / 4, t = lane % 4. A (16x16, row): register r holds row
  // g + 8 * (r % 2), columns c and c + 1 for c = 2t + 8 * (r / 2), the lower column in the low
  // half. B (16x8, col): register r holds rows k and k + 1 for k = 2t + 8r, column g. C/D:
  // c[i] is row g + 8 * (i / 2), column 2t + i % 2.
  auto a_at = [&](int row, int k) {
    const uint32_t reg = warp.a[(row % 8) * 4 + (k % 8) / 2][(row / 8) + 2 * (k / 8)];
    return bf16_half(reg, k % 2);
  };
  auto b_at = [&](int k, int col) {
    const uint32_t reg = warp.b[col * 4 + (k % 8) / 2][k / 8];
    return bf16_half(reg, k % 2);
  };
  const int g = lane / 4, t = lane % 4;
  float d[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += a_at(row, k) * b_at(k, col);
    d[i] = sum;
  }
  wait_at(warp.barrier);  // every lane has read the fragments before any warp writes again
  std::copy(d, d + 4, c);
}

void run_grid(const LaunchShape& shape, const std::function<void()>& thread_body) {
  const cudaError_t error = check_shape(shape);
  if (error != cudaSuccess) {
    record_launch_error(error);
    return;
  }
  if (t_run != nullptr) throw std::logic_error("host CUDA: a launch from inside a kernel");
  settle(shape.stream);
  static std::mutex launching;  // the static shared memory is the process's
  const std::lock_guard<std::mutex> lock(launching);
  BlockRun r;
  r.body = &thread_body;
  r.block_dim = shape.block;
  r.grid_dim = shape.grid;
  std::vector<unsigned char> shared(std::max<size_t>(shape.shared_bytes, 16) + 16);
  const uintptr_t address = reinterpret_cast<uintptr_t>(shared.data());
  r.shared = shared.data() + (16 - address % 16) % 16;
  t_run = &r;
  try {
    const uint64_t columns = shape.grid.x, rows = uint64_t{shape.grid.y} * columns;
    const uint64_t blocks = uint64_t{shape.grid.z} * rows;
    for (uint64_t i = 0; i < blocks; ++i) {
      const uint64_t b = scheduled(i, blocks);
      r.block_index =
          uint3{static_cast<unsigned>(b % columns),
                static_cast<unsigned>(b / columns % shape.grid.y), static_cast<unsigned>(b / rows)};
      std::fill(shared.begin(), shared.end(), kUnwrittenShared);
      if (__start_host_cuda_shared != nullptr)
        std::fill(__start_host_cuda_shared, __stop_host_cuda_shared, kUnwrittenShared);
      run_block(r, shape);
    }
  } catch (...) {
    t_run = nullptr;
    throw;
  }
  t_run = nullptr;
}

}  // namespace host_cuda
