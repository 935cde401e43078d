# NcclCommunicator (device buffers) joins parallel_core when the CUDA backend is on; it is
# the only parallel_core source that sees nccl.h and the CUDA headers.
if(TRAINER_WITH_CUDA)
  target_sources(parallel_core PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_communicator.cpp)
  target_link_libraries(parallel_core PRIVATE trainer_nccl)
endif()
