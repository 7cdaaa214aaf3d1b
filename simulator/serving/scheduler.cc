#include "simulator/serving/scheduler.h"

#include <algorithm>

namespace parallax::serving {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Diagnostics validate_scheduler_config(const SchedulerConfig& c, const std::string& where) {
  Diagnostics out;
  auto positive = [&](const char* field, int64_t v, const char* hint) {
    if (v < 1) {
      out.push_back({where + "." + field, "must be >= 1, got " + std::to_string(v), hint});
    }
  };
  positive("max_num_seqs", c.max_num_seqs, "vLLM's default is 256");
  positive("max_num_batched_tokens", c.max_num_batched_tokens, "vLLM's default is 8192");
  positive("block_size", c.block_size, "vLLM's default is 16");
  positive("num_gpu_blocks", c.num_gpu_blocks,
           "the KV-cache bytes of one replica / (block_size * KV bytes per token)");
  if (c.long_prefill_token_threshold < 0) {
    out.push_back({where + ".long_prefill_token_threshold",
                   "must be >= 0, got " + std::to_string(c.long_prefill_token_threshold),
                   "0 = no cap"});
  } else if (c.long_prefill_token_threshold > 0 && !c.enable_chunked_prefill) {
    out.push_back({where + ".long_prefill_token_threshold",
                   "caps prefill chunks, so it needs enable_chunked_prefill, got " +
                       std::to_string(c.long_prefill_token_threshold) + " with chunking off",
                   "set it to 0 or enable chunked prefill"});
  }
  return out;
}

int64_t peak_blocks(const Request& r, int64_t block_size) {
  PX_CHECK(block_size >= 1, "peak_blocks: block_size=" << block_size);
  return ceil_div(r.prompt_len + r.output_len - 1, block_size);
}

Diagnostics check_requests_fit(const std::vector<Request>& requests, const SchedulerConfig& c,
                               const std::string& where) {
  Diagnostics out;
  for (const Request& r : requests) {
    const std::string name = where + ": request " + std::to_string(r.id);
    const int64_t tokens = r.prompt_len + r.output_len - 1;
    const int64_t need = peak_blocks(r, c.block_size);
    if (need > c.num_gpu_blocks) {
      out.push_back({name,
                     "can never fit the KV cache: needs " + std::to_string(need) +
                         " blocks (prompt_len " + std::to_string(r.prompt_len) + " + output_len " +
                         std::to_string(r.output_len) + " - 1 = " + std::to_string(tokens) +
                         " tokens at " + std::to_string(c.block_size) + " per block), got " +
                         std::to_string(c.num_gpu_blocks) + " blocks in the cache",
                     "more KV memory per replica (fewer weights per GPU, more GPUs per replica) "
                     "or shorter requests"});
    }
    if (!c.enable_chunked_prefill && tokens > c.max_num_batched_tokens) {
      out.push_back({name,
                     "without chunked prefill its longest (re)compute must fit one step: needs " +
                         std::to_string(tokens) + " tokens, got max_num_batched_tokens " +
                         std::to_string(c.max_num_batched_tokens),
                     "enable chunked prefill or raise max_num_batched_tokens"});
    }
  }
  // Every problem is counted, but a workload of identical requests need not list thousands.
  constexpr size_t kShown = 10;
  if (out.size() > kShown) {
    const size_t more = out.size() - kShown;
    out.resize(kShown);
    out.push_back({where, "and " + std::to_string(more) + " more such problems", ""});
  }
  return out;
}

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config) {
  PX_CHECK(validate_scheduler_config(config, "scheduler").empty(),
           "Scheduler: invalid config; call validate_scheduler_config first");
  free_blocks_ = config.num_gpu_blocks;
}

void Scheduler::add(const Request& r) {
  PX_CHECK(r.prompt_len >= 1 && r.output_len >= 1, "Scheduler::add: request "
                                                       << r.id << " has prompt_len=" << r.prompt_len
                                                       << " output_len=" << r.output_len);
  PX_CHECK(check_requests_fit({r}, config_, "").empty(),
           "Scheduler::add: request " << r.id << " can never run; call check_requests_fit first");
  Seq s;
  s.id = r.id;
  s.prompt_len = r.prompt_len;
  s.output_len = r.output_len;
  seqs_.push_back(s);
  waiting_.push_back(static_cast<int32_t>(seqs_.size() - 1));
}

void Scheduler::add_prefilled(const Request& r) {
  PX_CHECK(r.output_len >= 2, "Scheduler::add_prefilled: request "
                                  << r.id << " has output_len=" << r.output_len
                                  << ", nothing left to decode");
  add(r);
  // Its blocks are allocated at admission (allocate() covers computed + new tokens), so the
  // transferred KV takes cache space only once the request is admitted, as vLLM's connector
  // allocates the blocks it loads into.
  Seq& s = seqs_.back();
  s.generated = 1;
  s.computed = s.prompt_len;
}

int64_t Scheduler::wanted_tokens(const Seq& s) const {
  int64_t n = s.num_tokens() - s.computed;
  const int64_t cap = config_.long_prefill_token_threshold;
  if (cap > 0 && n > cap) n = cap;
  return n;
}

bool Scheduler::allocate(Seq& s, int64_t new_tokens) {
  // Most steps fit the blocks already held; skip the division then (it is the hot path).
  if (s.computed + new_tokens <= s.blocks * config_.block_size) return true;
  const int64_t need = ceil_div(s.computed + new_tokens, config_.block_size) - s.blocks;
  if (need > free_blocks_) return false;
  if (need > 0) {
    s.blocks += need;
    free_blocks_ -= need;
  }
  return true;
}

void Scheduler::preempt(int32_t slot) {
  // Recompute, as vLLM V1: the KV is dropped and rebuilt from prompt + outputs on resumption.
  Seq& s = seqs_[static_cast<size_t>(slot)];
  free_blocks_ += s.blocks;
  s.blocks = 0;
  s.computed = 0;
  waiting_.push_front(slot);
  batch_.preempted.push_back(s.id);
}

void Scheduler::emit(int32_t slot, int64_t new_tokens) {
  Seq& s = seqs_[static_cast<size_t>(slot)];
  ScheduledSeq q;
  q.request = s.id;
  q.new_tokens = new_tokens;
  q.context_before = s.computed;
  q.samples = s.computed + new_tokens == s.num_tokens();
  // A decode: one token on top of a cache holding every earlier token of a request that has
  // already sampled. The tail of a chunked recompute can look the same, and costs the same.
  q.prefill = !(s.generated >= 1 && new_tokens == 1 && s.computed == s.num_tokens() - 1);
  (q.prefill ? batch_.prefill_tokens : batch_.decode_tokens) += new_tokens;
  batch_.sampled += q.samples ? 1 : 0;
  batch_.seqs.push_back(q);
  stepped_.push_back(slot);
  s.computed += new_tokens;
}

void Scheduler::schedule_running(int64_t* budget) {
  size_t i = 0;
  while (i < running_.size() && *budget > 0) {
    const int32_t slot = running_[i];
    Seq& s = seqs_[static_cast<size_t>(slot)];
    const int64_t n = std::min(wanted_tokens(s), *budget);
    PX_CHECK(n >= 1, "Scheduler: running request " << s.id << " has nothing to compute");
    bool scheduled = true;
    while (!allocate(s, n)) {
      const int32_t victim = running_.back();
      running_.pop_back();
      preempt(victim);
      if (victim == slot) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    emit(slot, n);
    *budget -= n;
    ++i;
  }
}

void Scheduler::schedule_waiting(int64_t* budget) {
  // vLLM V1 admits nobody in a step that had to preempt: memory is already short.
  if (!batch_.preempted.empty()) return;
  while (!waiting_.empty() && *budget > 0 && num_running() < config_.max_num_seqs) {
    const int32_t slot = waiting_.front();
    Seq& s = seqs_[static_cast<size_t>(slot)];
    int64_t n = wanted_tokens(s);
    if (!config_.enable_chunked_prefill && n > *budget) break;
    n = std::min(n, *budget);
    if (!allocate(s, n)) break;
    waiting_.pop_front();
    running_.push_back(slot);
    emit(slot, n);
    *budget -= n;
  }
}

const IterationBatch& Scheduler::schedule() {
  PX_CHECK(!pending_update_, "Scheduler::schedule: call update_from_output for the last step");
  batch_.seqs.clear();
  batch_.preempted.clear();
  batch_.prefill_tokens = batch_.decode_tokens = batch_.sampled = 0;
  stepped_.clear();
  int64_t budget = config_.max_num_batched_tokens;
  schedule_running(&budget);
  schedule_waiting(&budget);
  // Every request fits the cache alone and (without chunking) the budget, so some work is
  // always possible: the first running request, or the head of waiting when nothing runs.
  PX_CHECK(!batch_.empty() || !has_work(), "Scheduler::schedule: stalled with work pending");
  pending_update_ = true;
  return batch_;
}

void Scheduler::update_from_output(std::vector<int64_t>* finished) {
  PX_CHECK(pending_update_, "Scheduler::update_from_output: no step planned");
  pending_update_ = false;
  bool any_finished = false;
  for (size_t k = 0; k < stepped_.size(); ++k) {
    if (!batch_.seqs[k].samples) continue;
    Seq& s = seqs_[static_cast<size_t>(stepped_[k])];
    ++s.generated;
    if (s.generated < s.output_len) continue;
    free_blocks_ += s.blocks;
    s.blocks = 0;
    any_finished = true;
    if (finished != nullptr) finished->push_back(s.id);
  }
  if (!any_finished) return;
  std::erase_if(running_, [&](int32_t slot) {
    const Seq& s = seqs_[static_cast<size_t>(slot)];
    return s.generated >= s.output_len;
  });
}

}  // namespace parallax::serving
