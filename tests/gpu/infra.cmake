# (infra) GPU tests: caching allocator, streams/events, cuBLASLt GEMMs; NcclCommunicator over
# device buffers, in a world of one rank.
trainer_gpu_test(test_gpu_infra
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_infra.cpp ${CMAKE_CURRENT_LIST_DIR}/test_gpu_gemm.cpp
  LIBS runtime)
trainer_gpu_test(test_gpu_nccl_communicator
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_nccl_communicator.cpp
  LIBS parallel_core)
