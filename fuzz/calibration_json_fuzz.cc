// Fuzz target: the raw results of a calibration run (`calibrate --raw`, read back by
// `--from-raw`: calibrate/calibration_json.cc), then fitted to a profile as `--from-raw` does.
#include "calibrate/fit.h"
#include "calibrate/suite.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parallax;
  auto j = fuzz::json_of(data, size);
  if (!j) return 0;
  auto d = calibrate::calibration_from_json(*j, "fuzz:");
  if (!d) return 0;
  (void)calibrate::to_json(d.value()).dump();
  calibrate::FitOptions opt;
  opt.name = "fuzz";
  auto fitted = calibrate::fit_profile(d.value(), opt);
  if (fitted) (void)to_json(fitted->profile).dump();
  return 0;
}
