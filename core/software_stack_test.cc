#include "core/software_stack.h"

#include <gtest/gtest.h>

#include <string>

#include "core/measured_run.h"

namespace parallax {
namespace {

// Every framework a record may name but `other` has a row, with its source.
TEST(SoftwareStack, EveryNamedFrameworkHasKernelsAndASource) {
  const std::string names = std::string(", ") + kRecordFrameworks + ",";
  size_t start = 2;
  int rows = 0;
  while (start < names.size()) {
    const size_t end = names.find(',', start);
    const std::string f = names.substr(start, end - start);
    start = end + 2;
    if (f == "other") {
      EXPECT_EQ(find_stack_kernels(f), nullptr);
      continue;
    }
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr) << f;
    EXPECT_EQ(std::string(s->framework), f);
    EXPECT_GT(std::string(s->source).size(), 20u) << f;
    ++rows;
  }
  EXPECT_EQ(rows, 10);
  EXPECT_EQ(find_stack_kernels(""), nullptr);
}

// Megatron's family shares Megatron-LM's kernels; PyTorch's own stacks do not split sends.
TEST(SoftwareStack, FamiliesShareTheirKernels) {
  for (const char* f : {"nemo", "megatron-deepspeed"}) {
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->attention, megatron_stack().attention) << f;
    EXPECT_TRUE(s->pp_scatter_gather) << f;
    EXPECT_EQ(s->default_dropout, 0.1) << f;
  }
  for (const char* f : {"torchtitan", "fsdp", "deepspeed", "nanotron", "maxtext"}) {
    const StackKernels* s = find_stack_kernels(f);
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->pp_scatter_gather) << f;
    EXPECT_EQ(s->default_dropout, 0.0) << f;
  }
  EXPECT_EQ(pytorch_fsdp_stack().attention, AttentionImpl::kFlash2);
}

}  // namespace
}  // namespace parallax
