#pragma once
/// A continuous-batching scheduler as vLLM V1 runs it (vllm/v1/core/sched/scheduler.py), in
/// token units and KV-cache blocks, with no notion of time or hardware: the caller prices each
/// step. Requests carry a number of tokens (prompt + outputs sampled so far) and a number of
/// computed tokens (those whose KV is in the cache); each step gives every scheduled request
/// some new tokens to compute, and a request whose computed tokens reach its token count samples
/// one output token.
///
/// One step (`schedule()`):
/// 1. RUNNING requests, in order, while the token budget lasts: a decoding request gets 1 token;
///    one still prefilling (or recomputing after preemption) gets its next chunk, capped by the
///    remaining budget and `long_prefill_token_threshold`. KV blocks are allocated for the new
///    tokens; when the free blocks do not suffice, the LAST running request is preempted (all its
///    blocks freed, its computed tokens reset to 0, put at the FRONT of waiting) and allocation is
///    retried; when the request itself is the last one, it is preempted and the pass stops.
/// 2. WAITING requests, first come first served, only in a step that preempted nobody (as vLLM
///    V1), while running < max_num_seqs and budget remains: a request is admitted with the tokens
///    it still lacks (its prompt, or prompt + outputs so far when resuming), a partial chunk when
///    chunked prefill is on, only if the free blocks cover them (admission never preempts);
///    otherwise admission stops (head of line blocks).
/// `update_from_output()` then applies the step: each sampling request gains one output token;
/// the finished ones free their blocks and leave the running list.
///
/// Several steps may be in flight at once, as vLLM V1's batch queue keeps a pipeline-parallel
/// engine's stages busy: schedule() may be called again before the earlier steps are applied,
/// and update_from_output() applies the oldest. Computed tokens advance when a step is planned,
/// so a request whose scheduled tokens reach all it has (a decode, or its prompt's last chunk)
/// waits for that step's output before it is scheduled again, while a long prompt's next chunk
/// can go into the next step. A request preempted while a step of it is in flight loses that
/// step's output (its KV is recomputed anyway).
///
/// Without chunked prefill, a waiting request is admitted only when all its missing tokens fit in
/// the remaining budget of the step (vLLM's behaviour); prefills and decodes still share a step.
///
/// Prefix caching (on by default, as in vLLM V1): the blocks live in a KvBlockPool
/// (kv_block_pool.h). A request with nothing computed (new, or resuming after a preemption) is
/// first looked up: its leading full blocks whose content is cached (held by another request or
/// still in the free queue) count as computed, at most num_tokens - 1 tokens, so at least one
/// token is computed and samples (vLLM's max_cache_hit_length). Admission then needs free blocks
/// for the new tokens plus the hit blocks that sit in the free queue. A block's content is its
/// request's prompt up to the block's end when the block lies inside the prompt's shared prefix
/// (Request::prefix_hashes), and otherwise private to the request, which can only hit it itself,
/// after a preemption, if it was not evicted meanwhile.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/result.h"
#include "simulator/serving/kv_block_pool.h"
#include "simulator/serving/workload.h"

namespace parallax::serving {

/// The engine limits of vLLM's SchedulerConfig and CacheConfig.
struct SchedulerConfig {
  int64_t max_num_seqs = 256;                ///< requests in the running list at most
  int64_t max_num_batched_tokens = 8192;     ///< tokens computed in one step at most
  int64_t block_size = 16;                   ///< tokens per KV-cache block
  int64_t num_gpu_blocks = 0;                ///< KV-cache blocks of one replica (> 0 required)
  bool enable_chunked_prefill = true;        ///< a prompt may be computed over several steps
  int64_t long_prefill_token_threshold = 0;  ///< > 0: a prefill computes at most this many
                                             ///< tokens a step; 0 = no cap
  bool enable_prefix_caching = true;         ///< vLLM V1's default
};

/// Every problem in the config, where = `where` + "." + field.
Diagnostics validate_scheduler_config(const SchedulerConfig& c, const std::string& where);

/// KV blocks a request holds at its peak: its last sampled token never enters the cache, so
/// ceil((prompt_len + output_len - 1) / block_size).
int64_t peak_blocks(const Request& r, int64_t block_size);

/// One problem per request that can never run on `c` (the first ten, then a count of the rest): its
/// peak blocks exceed the cache, or (without chunked prefill) its longest recompute, prompt_len +
/// output_len - 1 tokens, exceeds max_num_batched_tokens. `where` names the requests' source.
Diagnostics check_requests_fit(const std::vector<Request>& requests, const SchedulerConfig& c,
                               const std::string& where);

/// One request's share of a step.
struct ScheduledSeq {
  int64_t request = 0;         ///< the Request::id given to Scheduler::add
  int64_t new_tokens = 0;      ///< tokens computed for it this step (>= 1)
  int64_t context_before = 0;  ///< its tokens already in the KV cache before the step
  bool samples = false;        ///< the step yields an output token for it (decode, last chunk)
  bool prefill = false;        ///< prompt or recompute tokens (false: one decode token)
};

/// One engine step: what the cost model prices.
struct IterationBatch {
  std::vector<ScheduledSeq> seqs;  ///< running requests first (in order), then admissions
  int64_t prefill_tokens = 0;      ///< sum of new_tokens over prefill seqs
  int64_t decode_tokens = 0;       ///< number of decode seqs (1 token each)
  int64_t sampled = 0;             ///< seqs with samples = true
  std::vector<int64_t> preempted;  ///< ids preempted while planning this step, in order

  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
  int64_t total_tokens() const { return prefill_tokens + decode_tokens; }
  bool empty() const { return seqs.empty(); }
  /// Requests that compute prompt (or recompute) tokens this step.
  int64_t num_prefill_seqs() const { return num_seqs() - decode_tokens; }
};

/// The scheduler of one engine replica. Not thread-safe; cheap per step: O(running + admitted).
class Scheduler {
 public:
  /// PX_CHECKs the config (validate it first with validate_scheduler_config).
  explicit Scheduler(const SchedulerConfig& config);

  /// Queues a request at the back of WAITING. PX_CHECKs lengths >= 1 and that it fits
  /// (check_requests_fit): a request that can never run would stall the engine forever.
  void add(const Request& r);

  /// Queues, at the back of WAITING, a request whose prompt was computed elsewhere and whose
  /// first token was sampled there (disaggregated decode, as vLLM's KV connector hands it over):
  /// it holds 1 output token and its prompt's KV counts as computed, so admission allocates
  /// blocks for prompt_len + 1 tokens and computes one decode token. A preemption drops that
  /// KV like any other: the request then recomputes prompt + outputs here. PX_CHECKs
  /// output_len >= 2 (one more token to decode) and that it fits, as add().
  void add_prefilled(const Request& r);

  /// Plans one step and allocates its KV blocks. A non-empty step is in flight until
  /// update_from_output() applies it; an empty one (nothing can be scheduled) needs no update.
  /// With no step in flight the batch is empty only when no request is running or waiting.
  /// The reference stays valid until the step is applied.
  const IterationBatch& schedule();

  /// Applies the oldest step in flight (PX_CHECKs there is one): samplers gain a token;
  /// finished requests free their blocks and leave. Appends the ids of finished requests to
  /// `finished` (may be null). Returns that step as applied, its output dropped for requests
  /// preempted meanwhile (samples = false); valid until the next update_from_output().
  const IterationBatch& update_from_output(std::vector<int64_t>* finished);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t steps_in_flight() const { return static_cast<int64_t>(in_flight_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t blocks_used() const { return config_.num_gpu_blocks - pool_.free_blocks(); }
  const SchedulerConfig& config() const { return config_; }
  /// Prefix-cache lookups so far: the tokens of the requests looked up, and the tokens found
  /// (vLLM's hit rate is hits / queries). Both 0 without prefix caching.
  int64_t prefix_query_tokens() const { return prefix_queries_; }
  int64_t prefix_hit_tokens() const { return prefix_hits_; }

 private:
  struct Seq {
    int64_t id = 0;
    int64_t prompt_len = 0, output_len = 0;
    int64_t generated = 0;        ///< output tokens sampled so far
    int64_t computed = 0;         ///< tokens whose KV is in the cache
    std::vector<int32_t> blocks;  ///< KV blocks held, in token order
    std::vector<uint64_t> chain;  ///< chained content keys of the prompt's named prefix
    int64_t hash_block = 0;       ///< tokens each chain entry covers
    int64_t shared_blocks = 0;    ///< leading KV blocks inside the named prefix
    int64_t keyed = 0;            ///< leading blocks given their content key
    uint32_t epoch = 0;           ///< preemptions so far: steps planned before are stale
    int64_t num_tokens() const { return prompt_len + generated; }
    int64_t capacity(int64_t block_size) const {
      return static_cast<int64_t>(blocks.size()) * block_size;
    }
  };

  /// Tokens `s` would compute now, before the budget cap, when `cached` more of its tokens come
  /// from the prefix cache.
  int64_t wanted_tokens(const Seq& s, int64_t cached = 0) const;
  /// Grows `s` to hold computed + new_tokens tokens; false when the free blocks do not suffice.
  bool allocate(Seq& s, int64_t new_tokens);
  /// The content key of block `j` of the request in `slot`.
  uint64_t block_key(int32_t slot, int64_t j) const;
  /// Keys the full computed blocks of `slot` from s.keyed on: the shared ones, and with
  /// `private_too` the request's own ones (only it can hit those, after a preemption).
  void key_blocks(int32_t slot, bool private_too);
  /// Cached leading blocks of `slot` (which has nothing computed), at most num_tokens - 1 tokens.
  std::vector<int32_t> cache_hits(int32_t slot);
  /// Returns the blocks of `s` to the pool, last first (vLLM frees in reverse order).
  void free_blocks(Seq& s);
  void preempt(int32_t slot);
  void emit(int32_t slot, int64_t new_tokens);
  void schedule_running(int64_t* budget);
  void schedule_waiting(int64_t* budget);

  SchedulerConfig config_;
  std::vector<Seq> seqs_;         ///< every request ever added, by slot
  std::vector<int32_t> running_;  ///< slots, in scheduling order
  std::deque<int32_t> waiting_;   ///< slots, front first
  /// A planned step: the batch, and each seq's slot and epoch (parallel to batch.seqs).
  struct Step {
    IterationBatch batch;
    std::vector<int32_t> slots;
    std::vector<uint32_t> epochs;
    void clear();
  };
  std::deque<Step> in_flight_;  ///< oldest first
  Step planning_;               ///< the step being planned
  Step completed_;              ///< the step last applied
  std::vector<Step> spare_;     ///< applied steps whose vectors the next plans reuse
  KvBlockPool pool_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  IterationBatch empty_;
};

}  // namespace parallax::serving
