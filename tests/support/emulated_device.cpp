// The reserved range, its allocator and the guarded backend of the emulated device
// (Note [Emulated device memory]): every entry of TRAINER_OPS is the host entry behind one
// Access and the bf16 widening.
#include "tests/support/emulated_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "runtime/error.h"
#include "runtime/kernels/cpu/convert.h"
#include "runtime/ops.h"
#include "tests/support/struct_fields.h"

namespace emulated {
namespace {

constexpr int64_t kReservedBytes = int64_t{16} << 30;  // address space only (MAP_NORESERVE)

// The range, a bump pointer with exact-size free lists, and how many Accesses are open.
class Arena {
 public:
  static Arena& get() {
    static Arena arena;
    return arena;
  }

  void* allocate(int64_t bytes) {
    const int64_t rounded = round_up(bytes, runtime::Allocator::kAlignmentBytes);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<void*>& free_list = free_blocks_[rounded];
    if (!free_list.empty()) {
      void* ptr = free_list.back();
      free_list.pop_back();
      return ptr;
    }
    TRAINER_ASSERT(used_ + rounded <= kReservedBytes,
                   "emulated device out of its " << kReservedBytes << " reserved bytes");
    void* ptr = base_ + used_;
    used_ += rounded;
    if (open_ > 0) protect(PROT_READ | PROT_WRITE);  // the new pages join the open range
    return ptr;
  }

  void deallocate(void* ptr, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_blocks_[round_up(bytes, runtime::Allocator::kAlignmentBytes)].push_back(ptr);
  }

  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_++ == 0) protect(PROT_READ | PROT_WRITE);
  }

  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--open_ == 0) protect(PROT_NONE);
  }

 private:
  Arena() {
    void* base = ::mmap(nullptr, static_cast<size_t>(kReservedBytes), PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    TRAINER_ASSERT(base != MAP_FAILED, "emulated device: mmap failed: " << std::strerror(errno));
    base_ = static_cast<char*>(base);
  }

  static int64_t round_up(int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  }

  // Sets the protection of every page handed out so far.
  void protect(int protection) {
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    const int64_t length = round_up(used_, page);
    if (length == 0) return;
    TRAINER_ASSERT(::mprotect(base_, static_cast<size_t>(length), protection) == 0,
                   "emulated device: mprotect failed: " << std::strerror(errno));
  }

  std::mutex mutex_;
  char* base_ = nullptr;
  int64_t used_ = 0;
  int open_ = 0;
  std::unordered_map<int64_t, std::vector<void*>> free_blocks_;
};

// Note [Emulated bf16]
// The host kernels compute in f32. A bf16 tensor reaches them as an f32 copy of its values
// (exact), and after the call every copy is rounded back to nearest even into its tensor
// (exact again for the inputs the call did not change). That is the GPU's precision model:
// bf16 storage, f32 arithmetic inside each op, one rounding per op output; only the order of
// the f32 sums differs. One copy per distinct tensor memory, so an op that works in place
// (logits into their gradient) still sees one buffer.
class Widening {
 public:
  // `t` itself unless it is bf16; then its f32 copy.
  runtime::Tensor stand_in(const runtime::Tensor& t) {
    if (!t.defined() || t.dtype() != runtime::DType::bf16) return t;
    for (const Pair& pair : pairs_)
      if (pair.original.raw() == t.raw() && pair.original.numel() == t.numel()) return pair.wide;
    runtime::Tensor wide = runtime::Tensor::empty(staging(), t.shape(), runtime::DType::f32,
                                                  runtime::MemoryCategory::workspace);
    runtime::cpu::convert(wide.f32(), t.data<uint16_t>(), t.numel());
    pairs_.push_back({t, wide});
    return wide;
  }
  // An operator's argument struct: a copy whose tensors are stand-ins.
  template <class Args>
  Args stand_in(const Args& args) {
    Args widened = args;
    test_support::for_each_field(widened, [this](auto& field) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, runtime::Tensor>)
        field = stand_in(field);
    });
    return widened;
  }
  // Rounds every copy back into its tensor.
  void narrow() {
    for (const Pair& pair : pairs_)
      runtime::cpu::convert(pair.original.data<uint16_t>(), pair.wide.f32(), pair.wide.numel());
  }

 private:
  struct Pair {
    runtime::Tensor original, wide;
  };
  static runtime::CpuAllocator& staging() {
    static runtime::CpuAllocator allocator;
    return allocator;
  }
  std::vector<Pair> pairs_;
};

// Backend entry Member of the host table, called with device memory open and bf16 tensors
// widened (Note [Emulated bf16]), those of an argument struct included.
template <auto Member>
struct Guarded;
template <class Result, class... Args, Result (*runtime::ops::Backend::*Member)(Args...)>
struct Guarded<Member> {
  static Result call(Args... args) {
    const Access open;
    Widening widening;
    if constexpr (std::is_void_v<Result>) {
      (runtime::ops::host_backend().*Member)(widening.stand_in(args)...);
      widening.narrow();
    } else {
      Result result = (runtime::ops::host_backend().*Member)(widening.stand_in(args)...);
      widening.narrow();
      return result;
    }
  }
};

runtime::ops::Backend guarded_backend() {
  using B = runtime::ops::Backend;
  B b{};
#define TRAINER_GUARDED_ENTRY(result, name, ...) b.name = &Guarded<&B::name>::call;
  TRAINER_OPS(TRAINER_GUARDED_ENTRY, TRAINER_GUARDED_ENTRY)
#undef TRAINER_GUARDED_ENTRY
  return b;
}

}  // namespace

Access::Access() {
  Arena::get().open();
}
Access::~Access() {
  Arena::get().close();
}

DeviceAllocator::~DeviceAllocator() = default;

void* DeviceAllocator::allocate(int64_t bytes, runtime::MemoryCategory category) {
  if (bytes == 0) return nullptr;
  void* ptr = Arena::get().allocate(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  category_stat(category).add(bytes);
  stats_.reserved.add(bytes);
  return ptr;
}

void DeviceAllocator::deallocate(void* ptr, int64_t bytes, runtime::MemoryCategory category) {
  if (ptr == nullptr) return;
  Arena::get().deallocate(ptr, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  category_stat(category).remove(bytes);
  stats_.reserved.remove(bytes);
}

Device::Device() {
  static const runtime::ops::Backend backend = guarded_backend();
  runtime::ops::register_device_backend(&backend);
}

Device::~Device() {
  runtime::ops::register_device_backend(nullptr);
}

}  // namespace emulated
