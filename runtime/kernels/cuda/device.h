// CUDA devices: how many this process sees (0 without a driver or a GPU, never
// an error) and the choice of one per local rank.
#pragma once

#include <array>
#include <string>

namespace runtime::cuda {

// Devices visible to this process; 0 when there is no driver or no device.
int device_count();
// Selects device local_rank % device_count() for this process's calls.
// Throws LibraryError when there is no device.
void select_device_for_local_rank(int local_rank);
// The current device's UUID (the same GPU gives the same bytes in every process).
std::array<unsigned char, 16> current_device_uuid();
// The current device's name ("NVIDIA H200").
std::string current_device_name();

}  // namespace runtime::cuda
