# (attention) sources of runtime_cuda: list(APPEND TRAINER_CUDA_SOURCES file.cu ...)
list(APPEND TRAINER_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_layout.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_gemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_block.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda_attention_ops.cu
  ${CMAKE_CURRENT_LIST_DIR}/cross_entropy.cu)
