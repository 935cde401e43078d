# (attention) GPU tests: trainer_gpu_test(...)
# The attention operators and cross entropy against their runtime::cpu twins.
trainer_gpu_test(test_gpu_attention
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_gpu_softmax.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_gpu_attention_layout.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_gpu_attention_gemm.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_gpu_cross_entropy.cpp
  LIBS runtime)
# NcclCommunicator over device buffers, in a world of one rank.
trainer_gpu_test(test_gpu_nccl_communicator
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_nccl_communicator.cpp
  LIBS parallel_core)
