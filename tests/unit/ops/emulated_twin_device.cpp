// The twin device of the CI binary: the emulated device (host kernels behind the PROT_NONE
// guard and the bf16 widening), whose results must equal the host's bit for bit.
#include <memory>

#include "tests/support/emulated_device.h"
#include "tests/unit/ops/twin_harness.h"

namespace op_twins {
namespace {

class EmulatedTwinDevice final : public TwinDevice {
 public:
  runtime::Allocator& allocator() override { return allocator_; }
  bool exact() const override { return true; }

 private:
  emulated::Device device_;  // registered first, unregistered last
  emulated::DeviceAllocator allocator_;
};

}  // namespace

std::unique_ptr<TwinDevice> make_twin_device() {
  return std::make_unique<EmulatedTwinDevice>();
}

}  // namespace op_twins
