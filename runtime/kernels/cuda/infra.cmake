# (infra) sources of runtime_cuda: device discovery, streams/events, the caching
# allocator and the cuBLASLt GEMMs.
list(APPEND TRAINER_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device.cu
  ${CMAKE_CURRENT_LIST_DIR}/stream.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda_allocator.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda_ops.cu
  ${CMAKE_CURRENT_LIST_DIR}/scratch_sizes.cu)
# TRAINER_CUBLAS_CHECK (cuda_check.h) names errors with cublasGetStatusName/String,
# which live in libcublas, not libcublasLt; runtime_cuda is defined after this file,
# hence the deferral (linking it twice, as attention.cmake also does, is harmless).
cmake_language(DEFER CALL target_link_libraries runtime_cuda PUBLIC CUDA::cublas)
