# (infra) sources of runtime_cuda: list(APPEND TRAINER_CUDA_SOURCES file.cu ...)
list(APPEND TRAINER_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/device.cu)
