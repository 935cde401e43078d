# (llama) sources of runtime_cuda: the Llama-family blocks' operators (RMSNorm, SwiGLU, the
# rotary embedding; one per .cu, declarations in the .h beside it) and their backend entries.
list(APPEND TRAINER_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/rmsnorm.cu
  ${CMAKE_CURRENT_LIST_DIR}/swiglu.cu
  ${CMAKE_CURRENT_LIST_DIR}/rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/cuda_llama_ops.cu)
