#pragma once
/// The requests a serving simulation replays: synthetic Poisson arrivals, or a trace parsed from
/// JSON Lines or CSV text (the caller reads the file; this code never touches the file system).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace parallax::serving {

/// Requests one serving simulation takes at most: each is simulated through every engine step
/// it is part of, and a million take about a minute.
inline constexpr int64_t kMaxRequests = 1'000'000;

/// One inference request: `prompt_len` tokens in, `output_len` tokens out (both >= 1).
struct Request {
  Request() = default;
  Request(int64_t id_, double arrival, int64_t prompt, int64_t output)
      : id(id_), arrival_s(arrival), prompt_len(prompt), output_len(output) {}

  int64_t id = 0;          ///< caller's label; reported back in per-request records
  double arrival_s = 0;    ///< seconds from the start of the trace
  int64_t prompt_len = 0;  ///< prompt tokens
  int64_t output_len = 0;  ///< tokens to generate, including the first
  /// What the prompt shares with other requests, for prefix caching (empty: nothing):
  /// prefix_hashes[k] names the content of prompt tokens [k * hash_block, (k + 1) * hash_block)
  /// (the last may end at prompt_len), as the `hash_ids` of Mooncake's traces do. Two requests
  /// share their first tokens up to the first position where their ids differ; the ids need not
  /// be chained (the scheduler chains them).
  std::vector<uint64_t> prefix_hashes;
  int64_t hash_block = 0;  ///< tokens each prefix hash names (>= 1 when prefix_hashes is set)
};

/// `n` requests of fixed lengths arriving as a Poisson process of `rate_per_s` requests per second:
/// inter-arrival gaps are exponential, drawn by inverse CDF (gap = -ln(1 - u) / rate, u uniform
/// in [0, 1) from the top 53 bits of std::mt19937_64(seed)), so a seed gives the same trace on
/// every platform. The first request arrives after one gap. `rate_per_s <= 0` or infinite: every
/// request arrives at t = 0. Ids are 0..n-1 in arrival order.
std::vector<Request> poisson_requests(int64_t n, double rate_per_s, int64_t prompt_len,
                                      int64_t output_len, uint64_t seed);

/// Gives each request a shared prompt prefix of `prefix_len` tokens (a system prompt), one of
/// `groups` distinct ones drawn uniformly for each request by std::mt19937_64(seed) (not the
/// arrivals' stream, so a trace keeps its arrivals). Requests shorter than prefix_len share
/// their whole prompt. PX_CHECKs prefix_len >= 1 and groups >= 1.
void assign_shared_prefixes(std::vector<Request>* requests, int64_t prefix_len, int64_t groups,
                            uint64_t seed);

/// Parses a request trace. The format is decided by the first non-blank line:
/// - JSON Lines when it starts with `{`: one object a line with the arrival time (`arrival_s` or
///   `timestamp`, seconds), the prompt length (`prompt_len`, `input_len` or `prompt_tokens`) and
///   the output length (`output_len`, `output_tokens` or `output_length`); optionally `hash_ids`,
///   an array of integers >= 0 naming the prompt's blocks of `hash_block` tokens for prefix
///   caching (Request::prefix_hashes, as Mooncake's traces carry them); another key is not
///   read, and said once in `notes` (when given) with the line that first has it.
/// - CSV otherwise: a header naming those columns (any order, extra columns noted as above), then
/// one
///   row a line; fields are plain numbers (no quoting).
/// Blank lines are skipped and `\r\n` endings accepted. Lengths must be integers >= 1 and the
/// arrival a finite number >= 0. Out-of-order arrivals are not errors: the result is sorted by
/// arrival (stable). Ids are the record's 0-based position in the trace (before sorting).
/// Errors: every bad line, as `source:LINE: field: what, got X`.
/// Arrivals are seconds: a trace in milliseconds (Mooncake's `timestamp`) must be scaled first.
Result<std::vector<Request>> parse_requests(std::string_view text, const std::string& source,
                                            int64_t hash_block = 512, Diagnostics* notes = nullptr);

}  // namespace parallax::serving
