// Host CUDA's fiber switch (fiber_switch.h).
#include "tests/host_cuda/fiber_switch.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
// host_cuda_switch(void** save, void* load): pushes rbp, rbx, r12-r15, stores rsp in *save,
// loads `load` and pops the same frame from it. The FP control words are not switched: every
// fiber runs under the host thread's (kernels do not change rounding modes).
asm(R"(
  .pushsection .text
  .globl host_cuda_switch
  .type host_cuda_switch, @function
host_cuda_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size host_cuda_switch, .-host_cuda_switch
  .popsection
)");
extern "C" void host_cuda_switch(void** save, void* load);
#endif

namespace host_cuda {

#if defined(__x86_64__)

void prepare_fiber(FiberContext& fiber, char* bottom, size_t bytes, void (*entry)()) {
  // From the top: a null return address for entry (it never returns), entry as the address
  // `ret` jumps to, six zeroed registers. At entry rsp + 8 is 16-byte aligned, as after a call.
  uintptr_t top = reinterpret_cast<uintptr_t>(bottom + bytes) & ~uintptr_t{15};
  auto* slots = reinterpret_cast<uint64_t*>(top);
  *--slots = 0;
  *--slots = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; ++r) *--slots = 0;
  fiber.stack_pointer = slots;
}

void switch_fiber(FiberContext& from, FiberContext& to) {
  host_cuda_switch(&from.stack_pointer, to.stack_pointer);
}

#else

void prepare_fiber(FiberContext& fiber, char* bottom, size_t bytes, void (*entry)()) {
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = bottom;
  fiber.context.uc_stack.ss_size = bytes;
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, entry, 0);
}

void switch_fiber(FiberContext& from, FiberContext& to) {
  swapcontext(&from.context, &to.context);
}

#endif

}  // namespace host_cuda
