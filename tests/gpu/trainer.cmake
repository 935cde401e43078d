# (trainer) GPU tests: the Trainer on a device against the CPU trainer (one fp32 step, a bf16
# loss curve), and every recompute preset's bit-identity and activation peak on the device.
trainer_gpu_test(test_gpu_trainer
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_trainer.cpp
  LIBS trainer_commands)
# `trainer generate` on a device: the decoder's logits and the sampled tokens against the host's.
trainer_gpu_test(test_gpu_decoder
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_decoder.cpp
  LIBS trainer_commands)
