# (elementwise) GPU tests: trainer_gpu_test(...)
