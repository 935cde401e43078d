# trainer_data: Megatron indexed datasets, GPT sampling, the synthetic corpus and the
# `trainer prepare-data` command. include()d from trainer/CMakeLists.txt.
add_library(trainer_data STATIC
  ${CMAKE_CURRENT_LIST_DIR}/data/indexed_dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/gpt_sampler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/synthetic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/prepare_data.cpp
)
target_include_directories(trainer_data PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainer_data PUBLIC runtime PRIVATE yaml-cpp trainer_warnings)
