# trainer_config: the typed run configuration (YAML schema, --set overrides,
# cross-field validation, to_yaml). include()d from trainer/CMakeLists.txt.
add_library(trainer_config STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config_fields.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_schema.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_yaml.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config_validate.cpp
)
target_include_directories(trainer_config PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(trainer_config PUBLIC recompute runtime PRIVATE yaml-cpp trainer_warnings)
