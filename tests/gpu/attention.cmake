# (attention) GPU tests: trainer_gpu_test(...)
