# (ops) GPU tests: the op twins of tests/unit/ops on CUDA (every operator of runtime/ops.h against
# the host, per-op tolerances), what they cannot see of the CUDA backend (argument checks, the
# bf16 master-weight copy, unregistering), and kernel paths that no operator reaches or at sizes
# the twins do not draw.
trainer_gpu_test(test_gpu_op_twins
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_twin_device.cpp
  LIBS op_twin_harness)
trainer_gpu_test(test_gpu_op_checks
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_op_checks.cpp
  LIBS runtime)
set(kernel_path_sources
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_attention_layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_cross_entropy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_dropout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_flash_block.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_layernorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gpu_rmsnorm.cpp)
trainer_gpu_test(test_gpu_kernel_paths SOURCES ${kernel_path_sources} LIBS runtime)
# tests/host_cuda runs the same sources.
set_property(GLOBAL PROPERTY TRAINER_GPU_KERNEL_PATH_SOURCES ${kernel_path_sources})
