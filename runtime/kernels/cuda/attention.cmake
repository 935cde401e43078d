# (attention) sources of runtime_cuda: list(APPEND TRAINER_CUDA_SOURCES file.cu ...)
