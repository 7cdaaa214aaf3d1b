#include "fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace parallax::fuzz {

std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("parallax-fuzz-" + std::to_string(::getpid()) + suffix))
                               .string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace parallax::fuzz
