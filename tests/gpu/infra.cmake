# (infra) GPU tests: caching allocator, streams/events, cuBLASLt GEMMs.
trainer_gpu_test(test_gpu_infra
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_infra.cpp ${CMAKE_CURRENT_LIST_DIR}/test_gpu_gemm.cpp
  LIBS runtime)
trainer_gpu_test(test_gpu_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_ops.cpp LIBS runtime)
