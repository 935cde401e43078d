# (elementwise) GPU tests: layernorm, GELU, dropout, embeddings, vector ops, AdamW against
# their runtime::cpu twins.
trainer_gpu_test(test_gpu_elementwise
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_elementwise.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_gpu_gelu.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_gpu_dropout.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_gpu_layernorm.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_gpu_embedding.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_gpu_adamw.cpp
  LIBS runtime)
