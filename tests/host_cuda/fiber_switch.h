// Host CUDA's fiber switch: a fiber's saved stack pointer and the switch between two fibers.
// On x86-64 it saves the callee-saved registers on the stack (a few nanoseconds); elsewhere
// it is ucontext's swapcontext (a system call per switch).
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace host_cuda {

struct FiberContext {
#if defined(__x86_64__)
  void* stack_pointer = nullptr;
#else
  ucontext_t context{};
#endif
};

// Prepares `fiber` to run entry() on the stack [bottom, bottom + bytes); entry must not return.
void prepare_fiber(FiberContext& fiber, char* bottom, size_t bytes, void (*entry)());
// Saves the running context into `from` and resumes `to`.
void switch_fiber(FiberContext& from, FiberContext& to);

}  // namespace host_cuda
