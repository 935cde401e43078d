# trainer_export: safetensors read/write and the Hugging Face GPT-2 export/import
# (model.safetensors + config.json). include()d from trainer/CMakeLists.txt.
add_library(trainer_export STATIC
  ${CMAKE_CURRENT_LIST_DIR}/export/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/export/hf_gpt2.cpp
)
target_include_directories(trainer_export PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainer_export PUBLIC model PRIVATE yaml-cpp trainer_warnings)
