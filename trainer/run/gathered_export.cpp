// The gathered export: rank 0's HfParamValues gather a parameter on its first read and free it
// after its last; the other ranks serve the same order of first reads.
#include "trainer/run/gathered_export.h"

#include <vector>

#include "parallel/pipeline/gather_params.h"
#include "runtime/error.h"
#include "trainer/export/hf_export.h"

namespace trainer {
namespace {

// Each parameter in the order of its first read.
std::vector<int64_t> first_reads(const std::vector<int64_t>& reads) {
  std::vector<int64_t> order;
  std::vector<bool> seen;
  for (const int64_t param : reads) {
    if (static_cast<size_t>(param) >= seen.size()) seen.resize(static_cast<size_t>(param) + 1);
    if (seen[static_cast<size_t>(param)]) continue;
    seen[static_cast<size_t>(param)] = true;
    order.push_back(param);
  }
  return order;
}

// Rank 0's parameters, gathered as the export first reads them, in the order the other ranks
// send them.
class GatheredParams final : public LoadedParamValues {
 public:
  GatheredParams(parallel::ParamGather& gather, const model::GptConfig& config,
                 const std::vector<int64_t>& reads)
      : LoadedParamValues(
            config,
            [this](int64_t param, const model::NamedParam&, std::vector<float>& values) {
              TRAINER_ASSERT(next_ < order_.size() && order_[next_] == param,
                             "the export read parameter " << param << " out of the gathered order");
              ++next_;
              gather_.gather(param, values);
            }),
        gather_(gather),
        order_(first_reads(reads)) {}

  // Takes what the other ranks still send (after a failed export), holding none of it.
  void drain() {
    clear();
    std::vector<float> values;
    for (; next_ < order_.size(); ++next_) {
      values.resize(static_cast<size_t>(gather_.numel(order_[next_])));
      gather_.gather(order_[next_], values);
    }
  }

 private:
  parallel::ParamGather& gather_;
  std::vector<int64_t> order_;  // first reads
  size_t next_ = 0;             // order_[next_] is the next to gather
};

}  // namespace

int64_t export_hf_gathered(const std::string& dir, parallel::ProcessGroups& groups,
                           const model::GptParams& local, const model::GptConfig& config,
                           runtime::DType dtype) {
  const std::vector<int64_t> reads = hf_export_param_reads(config);
  parallel::ParamGather gather(groups, config, local);
  if (groups.world_rank != 0) {
    for (const int64_t param : first_reads(reads)) gather.gather(param, {});
    return 0;
  }
  GatheredParams values(gather, config, reads);
  try {
    export_hf(dir, config, dtype, values);
  } catch (...) {
    values.drain();
    throw;
  }
  return values.peak_values();
}

}  // namespace trainer
