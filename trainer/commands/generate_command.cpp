// `trainer generate`'s launch: the first GPU with --device cuda, then the generate library's
// run_generate (trainer/generate/generate_command.h).
#include "trainer/generate/generate_command.h"

#include <iostream>
#include <vector>

#include "trainer/commands/commands.h"
#include "trainer/commands/device_setup.h"

namespace trainer::commands {

int generate(const std::vector<std::string>& args) {
  const GenerateOptions options = parse_generate_options(args);
  if (options.device == Device::cpu) return run_generate(options, std::cout);
  RunDevice device;
  device.set_up_gpu(0);
  return run_generate(options, std::cout, &device.allocator());
}

}  // namespace trainer::commands
