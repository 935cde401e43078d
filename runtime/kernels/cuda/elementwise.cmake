# (elementwise) sources of runtime_cuda: one operator per .cu (declarations in the .h beside it).
list(APPEND TRAINER_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/gelu.cu
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cu
  ${CMAKE_CURRENT_LIST_DIR}/layernorm.cu
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/adamw.cu)
