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

namespace {

const SchedulerConfig& checked(const SchedulerConfig& c) {
  PX_CHECK(validate_scheduler_config(c, "scheduler").empty(),
           "Scheduler: invalid config; call validate_scheduler_config first");
  return c;
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(checked(config)), pool_(config.num_gpu_blocks) {}

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
  if (config_.enable_prefix_caching && !r.prefix_hashes.empty()) {
    PX_CHECK(r.hash_block >= 1, "Scheduler::add: request " << r.id << " has prefix hashes of "
                                                           << r.hash_block << " tokens");
    // Chained, so a key names the whole prefix up to its block, as vLLM's block hashes do.
    uint64_t h = 0;
    for (uint64_t id : r.prefix_hashes) {
      h = mix64(h ^ mix64(id));
      s.chain.push_back(h);
    }
    s.hash_block = r.hash_block;
    const int64_t named =
        std::min(r.prompt_len, r.hash_block * static_cast<int64_t>(r.prefix_hashes.size()));
    s.shared_blocks = named / config_.block_size;
  }
  seqs_.push_back(std::move(s));
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

int64_t Scheduler::wanted_tokens(const Seq& s, int64_t cached) const {
  int64_t n = s.num_tokens() - s.computed - cached;
  const int64_t cap = config_.long_prefill_token_threshold;
  if (cap > 0 && n > cap) n = cap;
  return n;
}

bool Scheduler::allocate(Seq& s, int64_t new_tokens) {
  // Most steps fit the blocks already held; skip the division then (it is the hot path).
  if (s.computed + new_tokens <= s.capacity(config_.block_size)) return true;
  const int64_t need =
      ceil_div(s.computed + new_tokens, config_.block_size) - static_cast<int64_t>(s.blocks.size());
  if (need > pool_.free_blocks()) return false;
  for (int64_t k = 0; k < need; ++k) s.blocks.push_back(pool_.allocate());
  return true;
}

uint64_t Scheduler::block_key(int32_t slot, int64_t j) const {
  const Seq& s = seqs_[static_cast<size_t>(slot)];
  uint64_t key = 0;
  if (j < s.shared_blocks) {
    const int64_t last_token = (j + 1) * config_.block_size - 1;
    key = mix64(s.chain[static_cast<size_t>(last_token / s.hash_block)] ^ mix64(j));
  } else {
    // Private content: the slot and the block's position (never equal to a shared key but
    // by a 64-bit collision).
    key = mix64(mix64(~static_cast<uint64_t>(slot)) + static_cast<uint64_t>(j));
  }
  return key | 1;  // 0 means "no key" in the pool
}

void Scheduler::key_blocks(int32_t slot, bool private_too) {
  Seq& s = seqs_[static_cast<size_t>(slot)];
  int64_t full = s.computed / config_.block_size;
  if (!private_too) full = std::min(full, s.shared_blocks);
  for (; s.keyed < full; ++s.keyed) {
    pool_.set_key(s.blocks[static_cast<size_t>(s.keyed)], block_key(slot, s.keyed));
  }
}

std::vector<int32_t> Scheduler::cache_hits(int32_t slot) {
  std::vector<int32_t> hits;
  if (!config_.enable_prefix_caching) return hits;
  const Seq& s = seqs_[static_cast<size_t>(slot)];
  const int64_t most = (s.num_tokens() - 1) / config_.block_size;
  for (int64_t j = 0; j < most; ++j) {
    const int32_t b = pool_.lookup(block_key(slot, j));
    if (b < 0) break;
    hits.push_back(b);
  }
  prefix_queries_ += s.num_tokens();
  prefix_hits_ += static_cast<int64_t>(hits.size()) * config_.block_size;
  return hits;
}

void Scheduler::free_blocks(Seq& s) {
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) pool_.release(*it);
  s.blocks.clear();
  s.keyed = 0;
}

void Scheduler::preempt(int32_t slot) {
  // Recompute, as vLLM V1: the KV is dropped and rebuilt from prompt + outputs on resumption,
  // from the prefix cache as far as its blocks survive.
  if (config_.enable_prefix_caching) key_blocks(slot, /*private_too=*/true);
  Seq& s = seqs_[static_cast<size_t>(slot)];
  free_blocks(s);
  s.computed = 0;
  waiting_.push_front(slot);
  ++s.epoch;
  planning_.batch.preempted.push_back(s.id);
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
  IterationBatch& b = planning_.batch;
  (q.prefill ? b.prefill_tokens : b.decode_tokens) += new_tokens;
  b.sampled += q.samples ? 1 : 0;
  b.seqs.push_back(q);
  planning_.slots.push_back(slot);
  planning_.epochs.push_back(s.epoch);
  s.computed += new_tokens;
  // vLLM keys full blocks when it schedules their tokens, so a request admitted later in the
  // same step can already hit them.
  if (s.keyed < s.shared_blocks) key_blocks(slot, /*private_too=*/false);
}

void Scheduler::schedule_running(int64_t* budget) {
  size_t i = 0;
  while (i < running_.size() && *budget > 0) {
    const int32_t slot = running_[i];
    Seq& s = seqs_[static_cast<size_t>(slot)];
    const int64_t n = std::min(wanted_tokens(s), *budget);
    if (n == 0) {  // all its tokens are in a step in flight: it waits for that step's output
      ++i;
      continue;
    }
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
  if (!planning_.batch.preempted.empty()) return;
  while (!waiting_.empty() && *budget > 0 && num_running() < config_.max_num_seqs) {
    const int32_t slot = waiting_.front();
    Seq& s = seqs_[static_cast<size_t>(slot)];
    // Nothing computed: new, or resuming after a preemption; a disaggregated decode arrives with
    // its prompt computed and is not looked up.
    std::vector<int32_t> hits;
    if (s.computed == 0) hits = cache_hits(slot);
    const int64_t hit_tokens = static_cast<int64_t>(hits.size()) * config_.block_size;
    int64_t n = wanted_tokens(s, hit_tokens);
    if (!config_.enable_chunked_prefill && n > *budget) break;
    n = std::min(n, *budget);
    // New blocks for the tokens beyond the hits, and the hits that sit in the free queue.
    int64_t need = ceil_div(s.computed + hit_tokens + n, config_.block_size) -
                   static_cast<int64_t>(s.blocks.size() + hits.size());
    for (int32_t b : hits) need += pool_.ref_count(b) == 0 ? 1 : 0;
    if (need > pool_.free_blocks()) break;
    for (int32_t b : hits) {
      pool_.touch(b);
      s.blocks.push_back(b);
    }
    s.keyed = static_cast<int64_t>(hits.size());
    s.computed += hit_tokens;
    PX_CHECK(allocate(s, n), "Scheduler: admission lost its blocks");
    waiting_.pop_front();
    running_.push_back(slot);
    emit(slot, n);
    *budget -= n;
  }
}

void Scheduler::Step::clear() {
  batch.seqs.clear();
  batch.preempted.clear();
  batch.prefill_tokens = batch.decode_tokens = batch.sampled = 0;
  slots.clear();
  epochs.clear();
}

const IterationBatch& Scheduler::schedule() {
  planning_.clear();
  int64_t budget = config_.max_num_batched_tokens;
  schedule_running(&budget);
  schedule_waiting(&budget);
  if (planning_.batch.empty()) {
    // Every request fits the cache alone and (without chunking) the budget, so with nothing in
    // flight some work is always possible: the first running request, or the head of waiting.
    PX_CHECK(!in_flight_.empty() || !has_work(), "Scheduler::schedule: stalled with work pending");
    // A preemption can still happen in an empty step (the request itself was the victim).
    empty_.preempted = planning_.batch.preempted;
    return empty_;
  }
  in_flight_.push_back(std::move(planning_));
  // Plan the next step in the vectors of an applied one.
  planning_ = Step{};
  if (!spare_.empty()) {
    planning_ = std::move(spare_.back());
    spare_.pop_back();
  }
  return in_flight_.back().batch;
}

const IterationBatch& Scheduler::update_from_output(std::vector<int64_t>* finished) {
  PX_CHECK(!in_flight_.empty(), "Scheduler::update_from_output: no step in flight");
  spare_.push_back(std::move(completed_));
  completed_ = std::move(in_flight_.front());
  in_flight_.pop_front();
  IterationBatch& batch = completed_.batch;
  bool any_finished = false;
  for (size_t k = 0; k < completed_.slots.size(); ++k) {
    ScheduledSeq& q = batch.seqs[k];
    if (!q.samples) continue;
    Seq& s = seqs_[static_cast<size_t>(completed_.slots[k])];
    if (s.epoch != completed_.epochs[k]) {
      q.samples = false;  // preempted after this step was planned: the token is dropped
      --batch.sampled;
      continue;
    }
    ++s.generated;
    if (s.generated < s.output_len) continue;
    free_blocks(s);
    any_finished = true;
    if (finished != nullptr) finished->push_back(s.id);
  }
  if (any_finished) {
    std::erase_if(running_, [&](int32_t slot) {
      const Seq& s = seqs_[static_cast<size_t>(slot)];
      return s.generated >= s.output_len;
    });
  }
  return batch;
}

}  // namespace parallax::serving
