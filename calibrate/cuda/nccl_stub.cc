// make_nccl_communicator when NCCL was not found at configure time: a clean failure.

#include "calibrate/backend.h"

namespace parallax::calibrate {

Result<std::unique_ptr<Communicator>> make_nccl_communicator(int* /*argc*/, char*** /*argv*/) {
  return Diagnostic{"nccl", "this build has no NCCL",
                    "install NCCL (nccl.h and libnccl) or set NCCL_HOME, then reconfigure"};
}

}  // namespace parallax::calibrate
