// Host CUDA's fiber switch (fiber_switch.h).
#include "tests/host_cuda/fiber_switch.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
// host_cuda_switch(void** save, void* load): pushes rbp, rbx, r12-r15 and the MXCSR / x87
// control words, stores rsp in *save, loads `load` and pops the same frame from it.
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
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
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
  // `ret` jumps to, six zeroed registers, the control words of the running thread. At entry
  // rsp + 8 is 16-byte aligned, as after a call.
  uintptr_t top = reinterpret_cast<uintptr_t>(bottom + bytes) & ~uintptr_t{15};
  auto* slots = reinterpret_cast<uint64_t*>(top);
  *--slots = 0;
  *--slots = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; ++r) *--slots = 0;
  uint32_t mxcsr = 0;
  uint16_t fpu_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_control));
  uint64_t words = mxcsr | uint64_t{fpu_control} << 32;
  *--slots = words;
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
