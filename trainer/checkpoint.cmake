# trainer_checkpoint: resume checkpoints (per-rank shard files, manifest.json, `latest`) and the
# resharding reader. include()d from trainer/CMakeLists.txt.
add_library(trainer_checkpoint STATIC
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_hash.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_manifest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_save.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_load.cpp
)
target_include_directories(trainer_checkpoint PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainer_checkpoint
  PUBLIC trainer_export parallel_core runtime
  PRIVATE yaml-cpp trainer_warnings)
