// Soak run of tally's runtime under ordinary CUDA usage (issue 32, docs/lifecycle.md): host
// threads that mix streams, graph captures and replays, strategies, types and sizes, every
// result compared bit for bit with the host backend. The lifecycle tests each pin one
// situation; this program looks for what only their interleaving shows (a scratch block
// shared by two kernels that overlap, a stream handle reused while work of its predecessor
// still runs, a graph replayed beside direct calls), so it runs for a while rather than once.
//
//   soak_lifecycle [--seconds S] [--threads T] [--seed N]
//
// Prints the seed first, and a last line
//   soak: T threads, S s, C checks, M mismatches, E errors, seed N
// that scripts/gpu-check puts in its summary. Exit status 0 only for C > 0, M == 0, E == 0.
// Timing decides how the threads interleave, so a seed replays each thread's choices and
// data, not the interleaving.

#include "tally/error.cuh"
#include "tally/reduce.cuh"
#include "tally/scratch.cuh"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using soak_clock = std::chrono::steady_clock;

// Affine maps x -> mul * x + add (mod 2^16), packed as mul << 16 | add; op(f, g) is f, then g.
// Composition is associative but not commutative, and tally cannot know it is associative
// only, so it takes the order-preserving plan; a fold in the wrong order gives another map
// (odd multipliers keep the products from collapsing to zero, which would hide the order).
struct affine16_then {
  __host__ __device__ unsigned operator()(unsigned f, unsigned g) const {
    const unsigned f_mul = f >> 16, f_add = f & 0xFFFFu, g_mul = g >> 16, g_add = g & 0xFFFFu;
    return ((f_mul * g_mul) & 0xFFFFu) << 16 | ((g_mul * f_add + g_add) & 0xFFFFu);
  }
};
static_assert(!tally::is_commutative_v<affine16_then>, "the soak needs one operator on the ordered plan");

// Per-call data comes from this, seeded by the thread's generator: millions of values per
// regeneration through mt19937_64 and its distributions would cost more than the device call.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// Values as the tests draw them: floats of mixed signs and magnitudes (no NaN, whose payload
// the host and the device need not agree on), integers whose sums overflow at large N (both
// sides wrap), unsigned values that are affine maps with odd multipliers.
template <class T>
T value_from(std::uint64_t u) {
  if constexpr (std::is_floating_point_v<T>) {
    const double mantissa = double(u >> 11) * 0x1.0p-52 - 1.0;  // [-1, 1)
    return static_cast<T>(std::ldexp(mantissa, int(u & 15u) - 8));
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<long long>((u >> 32) % 2000001u) - 1000000);
  } else {
    return static_cast<T>((((u >> 16) & 0xFFFFu) | 1u) << 16 | (u & 0xFFFFu));
  }
}

template <class T>
std::string show(const T& v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  char text[96];
  if constexpr (std::is_same_v<T, float>) {
    std::snprintf(text, sizeof text, "%.9g (bits 0x%08llx)", double(v), static_cast<unsigned long long>(bits));
  } else if constexpr (std::is_same_v<T, double>) {
    std::snprintf(text, sizeof text, "%.17g (bits 0x%016llx)", v, static_cast<unsigned long long>(bits));
  } else if constexpr (std::is_signed_v<T>) {
    std::snprintf(text, sizeof text, "%d (bits 0x%08llx)", int(v), static_cast<unsigned long long>(bits));
  } else {
    std::snprintf(text, sizeof text, "x*%u+%u (bits 0x%08llx)", unsigned(v) >> 16, unsigned(v) & 0xFFFFu,
                  static_cast<unsigned long long>(bits));
  }
  return text;
}

const char* strategy_name(tally::strategy s) {
  switch (s) {
    case tally::strategy::automatic: return "automatic";
    case tally::strategy::single_pass: return "single_pass";
    case tally::strategy::two_pass: return "two_pass";
    case tally::strategy::block_atomic: return "block_atomic";
    case tally::strategy::warp_atomic: return "warp_atomic";
  }
  return "?";
}

// A CUDA call of the soak's own failed: the message names the call and the error.
void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // already reported here; the thread's next call must not see it again
  throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
}

// What a thread is doing, for mismatch and error reports and for the hang report.
struct call_info {
  const char* type = "";
  const char* op = "";
  std::uint64_t n = 0;
  std::uint64_t offset = 0;
  tally::strategy strategy = tally::strategy::automatic;
  const char* mode = "";
  const char* stream = "";
  const char* capture = "";  // the capture mode, for graphs
  int replay = 0;            // 1-based replay of a graph; 0 otherwise
  std::string text() const {
    std::string s = std::string(type) + " " + op + ", n " + std::to_string(n) + " at offset " + std::to_string(offset) +
                    ", strategy " + strategy_name(strategy) + ", mode " + mode + ", stream " + stream;
    if (*capture) s += std::string(", captured in ") + capture + " mode";
    if (replay > 0) s += ", replay " + std::to_string(replay);
    return s;
  }
};

std::mutex print_mutex;
void print_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(print_mutex);
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Only the first few failures are printed in full: after a lost context every call fails,
// and thousands of identical lines would bury the first, which is the one that explains.
constexpr int detailed_reports = 10;
std::atomic<int> reports_printed{0};
bool may_report() { return reports_printed.fetch_add(1) < detailed_reports; }

// A thread stops after this many errors: by then the context is usually lost, and spinning
// on it only adds noise.
constexpr std::uint64_t max_errors_per_thread = 20;

// Per thread and type: buffers by size class, so that a call allocates nothing yet reads
// data that keeps changing. Each holds 64 elements beyond its class's largest N, for a
// start at any offset below 64: misaligned starts take the element loads.
constexpr std::uint64_t slack = 64;
constexpr std::uint64_t class_limits[3] = {std::uint64_t(1) << 16, std::uint64_t(1) << 22, std::uint64_t(1) << 24};

template <class T>
struct data_slot {
  T* device = nullptr;
  std::vector<T> host;
};

template <class T>
struct typed_data {
  data_slot<T> slots[3];
};

struct worker {
  int index = 0;
  std::mt19937_64 rng;
  cudaStream_t own = nullptr;
  cudaStream_t shared = nullptr;
  cudaStream_t capture = nullptr;  // made on first use, destroyed now and then before a replay
  void* out = nullptr;             // reduce_into's and the graphs' output (8 bytes)
  void* result = nullptr;          // pinned: copies of it land here without a staging copy
  typed_data<float> f32;
  typed_data<double> f64;
  typed_data<int> i32;
  typed_data<unsigned> u32;

  std::atomic<std::uint64_t> checks{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<bool> finished{false};

  std::mutex current_mutex;
  call_info current;
  void set_current(const call_info& info) {
    std::lock_guard<std::mutex> lock(current_mutex);
    current = info;
  }
  call_info get_current() {
    std::lock_guard<std::mutex> lock(current_mutex);
    return current;
  }

  std::uint64_t below(std::uint64_t bound) { return rng() % bound; }
};

void record_error(worker& w, const std::string& what) {
  w.errors.fetch_add(1);
  if (may_report()) print_line("ERROR thread " + std::to_string(w.index) + ": " + w.get_current().text() + ": " + what);
}

template <class T>
void compare(worker& w, const T& got, const T& expected, const call_info& info) {
  w.checks.fetch_add(1);
  if (std::memcmp(&got, &expected, sizeof(T)) == 0) return;
  w.mismatches.fetch_add(1);
  if (may_report())
    print_line("MISMATCH thread " + std::to_string(w.index) + ": " + info.text() + ": got " + show(got) +
               ", expected " + show(expected) + " (host backend)");
}

// A stream made for one call and destroyed after it; its handle is often one the driver
// handed out before, which is the case tally must not confuse with the earlier stream.
struct fresh_stream {
  cudaStream_t stream = nullptr;
  explicit fresh_stream(std::mt19937_64& rng) {
    check(cudaStreamCreateWithFlags(&stream, rng() % 2 ? cudaStreamNonBlocking : cudaStreamDefault),
          "cudaStreamCreateWithFlags (a fresh stream)");
  }
  void destroy() {
    const cudaStream_t s = stream;
    stream = nullptr;
    check(cudaStreamDestroy(s), "cudaStreamDestroy (a fresh stream)");
  }
  ~fresh_stream() {
    if (stream) cudaStreamDestroy(stream);
  }
  fresh_stream(const fresh_stream&) = delete;
  fresh_stream& operator=(const fresh_stream&) = delete;
};

struct graph_guard {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void destroy() {
    const cudaGraphExec_t e = exec;
    const cudaGraph_t g = graph;
    exec = nullptr;
    graph = nullptr;
    if (e) check(cudaGraphExecDestroy(e), "cudaGraphExecDestroy");
    if (g) check(cudaGraphDestroy(g), "cudaGraphDestroy");
  }
  ~graph_guard() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

std::uint64_t draw_size(worker& w) {
  const bool large = w.below(32) == 0;
  const double low = large ? 22.0 : 0.0, high = large ? 24.0 : 22.0;
  const double exponent = low + (high - low) * std::uniform_real_distribution<double>(0.0, 1.0)(w.rng);
  std::uint64_t n = static_cast<std::uint64_t>(std::exp2(exponent));
  if (w.below(8) == 0) {  // a power of two or a neighbour: where tiles and plan shapes change
    int k = 0;
    while ((n >> (k + 1)) != 0) ++k;
    n = (std::uint64_t(1) << k) + w.below(3) - 1;
  }
  if (n < 1) n = 1;
  if (n > class_limits[2]) n = class_limits[2];
  return n;
}

template <class T>
void fill(std::vector<T>& v, std::uint64_t from, std::uint64_t count, std::uint64_t seed) {
  splitmix64 gen{seed};
  for (std::uint64_t i = from; i < from + count; ++i) v[i] = value_from<T>(gen.next());
}

// Makes room for n elements and returns the offset the call starts at. The smallest class
// gets new values under the call's range on every call; the larger ones are regenerated now
// and then, since a few million values cost more on the host than the call does.
template <class T>
std::uint64_t prepare(worker& w, typed_data<T>& data, std::uint64_t n, data_slot<T>*& slot_out) {
  const int cls = n <= class_limits[0] ? 0 : (n <= class_limits[1] ? 1 : 2);
  data_slot<T>& slot = data.slots[cls];
  const std::uint64_t capacity = class_limits[cls] + slack;
  const std::uint64_t offset = w.below(slack);
  std::uint64_t from = 0, count = 0;
  if (slot.device == nullptr) {
    void* p = nullptr;
    check(cudaMalloc(&p, capacity * sizeof(T)), "cudaMalloc (input)");
    slot.device = static_cast<T*>(p);
    slot.host.resize(capacity);
    count = capacity;
  } else if (cls == 0) {
    from = offset;
    count = n;
  } else if (w.below(cls == 1 ? 32 : 64) == 0) {
    count = capacity;
  }
  if (count > 0) {
    fill(slot.host, from, count, w.rng());
    check(cudaMemcpyAsync(slot.device + from, slot.host.data() + from, count * sizeof(T), cudaMemcpyHostToDevice, w.own),
          "cudaMemcpyAsync (input)");
    check(cudaStreamSynchronize(w.own), "cudaStreamSynchronize (input)");
  }
  slot_out = &slot;
  return offset;
}

tally::strategy draw_strategy(worker& w, bool atomics) {
  static constexpr tally::strategy all[] = {tally::strategy::automatic, tally::strategy::single_pass,
                                            tally::strategy::two_pass, tally::strategy::block_atomic,
                                            tally::strategy::warp_atomic};
  return all[w.below(atomics ? 5 : 3)];
}

// A stream for a direct call: the policy's handle and the handle to order copies and waits
// on. "0" is tally::device without .on(): stream 0, which tally resolves in this translation
// unit (built without --default-stream per-thread) to the legacy stream.
enum class stream_kind { own, shared, legacy, per_thread, zero, fresh };
constexpr const char* stream_kind_names[] = {"own", "shared", "legacy", "per-thread", "0", "fresh"};

// The host backend's threads: a few each, since every soak thread computes references at once
// and the bits do not depend on the count.
constexpr unsigned host_threads = 2;

template <class T, class Op>
void run_call(worker& w, typed_data<T>& data, const char* type_name, const char* op_name, Op op, bool atomics) {
  call_info info;
  info.type = type_name;
  info.op = op_name;
  info.n = draw_size(w);
  info.strategy = draw_strategy(w, atomics);
  const int mode = int(w.below(3));
  info.mode = mode == 0 ? "reduce" : (mode == 1 ? "reduce_into" : "graph");
  w.set_current(info);

  data_slot<T>* slot = nullptr;
  info.offset = prepare(w, data, info.n, slot);
  const T* const first = slot->device + info.offset;
  const T* const last = first + info.n;
  const T* const host_first = slot->host.data() + info.offset;
  const T init = value_from<T>(w.rng());
  const auto reference = [&] { return tally::reduce(tally::host.threads(host_threads), host_first, host_first + info.n, init, op); };
  T* const out = static_cast<T*>(w.out);
  T* const result = static_cast<T*>(w.result);

  if (mode < 2) {
    const auto kind = static_cast<stream_kind>(w.below(6));
    info.stream = stream_kind_names[int(kind)];
    w.set_current(info);
    std::unique_ptr<fresh_stream> fresh;
    cudaStream_t stream = nullptr;
    switch (kind) {
      case stream_kind::own: stream = w.own; break;
      case stream_kind::shared: stream = w.shared; break;
      case stream_kind::legacy: stream = cudaStreamLegacy; break;
      case stream_kind::per_thread: stream = cudaStreamPerThread; break;
      case stream_kind::zero: stream = cudaStreamLegacy; break;
      case stream_kind::fresh:
        fresh = std::make_unique<fresh_stream>(w.rng);
        stream = fresh->stream;
        break;
    }
    const tally::strategy_forcing_policy policy =
        (kind == stream_kind::zero ? tally::device : tally::device.on(stream)).strategy(info.strategy);
    T got;
    T expected;
    if (mode == 0) {
      got = tally::reduce(policy, first, last, init, op);
      expected = reference();
    } else {
      check(cudaMemsetAsync(out, 0xFF, sizeof(T), stream), "cudaMemsetAsync (poisoning the output)");
      tally::reduce_into(policy, first, last, out, init, op);
      check(cudaMemcpyAsync(result, out, sizeof(T), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (the result)");
      expected = reference();  // while the device works
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (the result)");
      std::memcpy(&got, result, sizeof(T));
    }
    // Right after the call: the stream's work may still be retiring, and the next stream
    // created may get this handle.
    if (fresh) fresh->destroy();
    compare(w, got, expected, info);
    return;
  }

  // A graph: captured on the thread's capture stream (non-blocking: a blocking stream under
  // capture would be joined by other threads' legacy-stream work, which invalidates the
  // capture), in a mode that lets other threads go on with calls CUDA deems unsafe.
  const bool relaxed = w.below(2) == 0;
  info.capture = relaxed ? "relaxed" : "thread-local";
  info.stream = "capture";
  w.set_current(info);
  if (w.capture == nullptr)
    check(cudaStreamCreateWithFlags(&w.capture, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (capture stream)");
  graph_guard g;
  check(cudaStreamBeginCapture(w.capture, relaxed ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  try {
    tally::reduce_into(tally::device.on(w.capture).strategy(info.strategy), first, last, out, init, op);
  } catch (...) {
    // Ends the capture, so that the stream is not left capturing; the stream is replaced,
    // since what a failed capture leaves on it is not the soak's to judge.
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(w.capture, &broken);
    if (broken) cudaGraphDestroy(broken);
    cudaStreamDestroy(w.capture);
    w.capture = nullptr;
    cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(w.capture, &g.graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&g.exec, g.graph, 0), "cudaGraphInstantiate");
  const T expected = reference();

  // The graph must not depend on the stream it was captured on (issue 32's first row: the
  // capturing stream destroyed, its handle reused by a new stream, a direct call on it).
  if (w.below(4) == 0) {
    check(cudaStreamDestroy(w.capture), "cudaStreamDestroy (capture stream)");
    w.capture = nullptr;
    if (w.below(2) == 0) {
      check(cudaStreamCreateWithFlags(&w.capture, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (capture stream)");
      call_info direct = info;
      direct.mode = "reduce";
      direct.stream = "new stream after the capture stream's destruction";
      direct.capture = "";
      direct.strategy = draw_strategy(w, atomics);
      w.set_current(direct);
      compare(w, tally::reduce(tally::device.on(w.capture).strategy(direct.strategy), first, last, init, op), expected,
              direct);
    }
  }

  const int replays = 1 + int(w.below(5));
  for (int r = 1; r <= replays; ++r) {
    const int where = int(w.below(3));
    info.replay = r;
    info.stream = where == 0 ? "own" : (where == 1 ? "shared" : "fresh");
    w.set_current(info);
    std::unique_ptr<fresh_stream> fresh;
    cudaStream_t stream = where == 0 ? w.own : w.shared;
    if (where == 2) {
      fresh = std::make_unique<fresh_stream>(w.rng);
      stream = fresh->stream;
    }
    check(cudaMemsetAsync(out, 0xFF, sizeof(T), stream), "cudaMemsetAsync (poisoning the output)");
    check(cudaGraphLaunch(g.exec, stream), "cudaGraphLaunch");
    check(cudaMemcpyAsync(result, out, sizeof(T), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (the result)");
    // A direct call on the capturing stream while the replay may still run (issue 32's second
    // row): the two must share no scratch.
    if (w.capture != nullptr && w.below(4) == 0) {
      call_info direct = info;
      direct.mode = "reduce beside a replay";
      direct.stream = "capture";
      direct.capture = "";
      direct.replay = 0;
      direct.strategy = draw_strategy(w, atomics);
      w.set_current(direct);
      compare(w, tally::reduce(tally::device.on(w.capture).strategy(direct.strategy), first, last, init, op), expected,
              direct);
      w.set_current(info);
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (a replay)");
    T got;
    std::memcpy(&got, result, sizeof(T));
    if (fresh) fresh->destroy();
    compare(w, got, expected, info);
  }
  g.destroy();
}

void one_call(worker& w) {
  switch (w.below(4)) {
    case 0: run_call(w, w.f32, "float", "plus", tally::plus<float>{}, false); break;
    case 1: run_call(w, w.f64, "double", "plus", tally::plus<double>{}, false); break;
    case 2:
      switch (w.below(3)) {
        case 0: run_call(w, w.i32, "int", "plus", tally::plus<int>{}, true); break;
        case 1: run_call(w, w.i32, "int", "minimum", tally::minimum<int>{}, true); break;
        default: run_call(w, w.i32, "int", "maximum", tally::maximum<int>{}, true); break;
      }
      break;
    default: run_call(w, w.u32, "unsigned", "affine16_then (ordered)", affine16_then{}, false); break;
  }
}

template <class T>
void free_data(typed_data<T>& data) {
  for (auto& slot : data.slots) {
    if (slot.device) check(cudaFree(slot.device), "cudaFree (input)");
    slot.device = nullptr;
  }
}

void run_worker(worker& w, soak_clock::time_point deadline) {
  call_info setup;
  setup.mode = "setting up";
  w.set_current(setup);
  bool ready = false;
  try {
    // Half the threads' own streams are blocking: they then order with the legacy stream
    // that other threads use, which is another way for kernels to wait on each other.
    check(cudaStreamCreateWithFlags(&w.own, w.index % 2 ? cudaStreamNonBlocking : cudaStreamDefault),
          "cudaStreamCreateWithFlags (own stream)");
    check(cudaMalloc(&w.out, 8), "cudaMalloc (output)");
    check(cudaMallocHost(&w.result, 8), "cudaMallocHost (result)");
    ready = true;
  } catch (const std::exception& e) {
    record_error(w, e.what());
  }

  while (ready && soak_clock::now() < deadline && w.errors.load() < max_errors_per_thread) {
    try {
      if (w.below(64) == 0) {
        call_info held;
        held.mode = "scratch_held";
        w.set_current(held);
        const tally::scratch_usage usage = tally::scratch_held();
        (void)usage;  // no expectation beyond not throwing: other threads change it at any time
      }
      one_call(w);
      // tally never sets the thread's last error when its calls succeed (docs/lifecycle.md),
      // and the soak's own failures clear theirs: anything left pending came from a call.
      const cudaError_t pending = cudaGetLastError();
      if (pending != cudaSuccess)
        record_error(w, std::string("a CUDA error was left pending by calls that succeeded: ") + cudaGetErrorName(pending));
    } catch (const tally::cuda_error& e) {
      record_error(w, std::string("tally::cuda_error (") + cudaGetErrorName(e.code()) + "): " + e.what());
    } catch (const std::exception& e) {
      record_error(w, std::string("exception: ") + e.what());
    }
  }

  call_info teardown;
  teardown.mode = "tearing down";
  w.set_current(teardown);
  try {
    if (w.own) check(cudaStreamSynchronize(w.own), "cudaStreamSynchronize (own stream)");
    if (w.own) check(cudaStreamDestroy(w.own), "cudaStreamDestroy (own stream)");
    if (w.capture) check(cudaStreamDestroy(w.capture), "cudaStreamDestroy (capture stream)");
    w.own = w.capture = nullptr;
    free_data(w.f32);
    free_data(w.f64);
    free_data(w.i32);
    free_data(w.u32);
    if (w.out) check(cudaFree(w.out), "cudaFree (output)");
    if (w.result) check(cudaFreeHost(w.result), "cudaFreeHost (result)");
    w.out = w.result = nullptr;
  } catch (const std::exception& e) {
    record_error(w, e.what());
  }
  w.finished.store(true);
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr, "soak_lifecycle: %s\nusage: soak_lifecycle [--seconds S] [--threads T] [--seed N]\n", message);
  std::exit(2);
}

std::uint64_t parse_number(const char* flag, const char* text) {
  if (text == nullptr) usage((std::string(flag) + " needs a number").c_str());
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-')
    usage((std::string(flag) + ": not a number: " + text).c_str());
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seconds = 60, threads = 16;
  std::uint64_t seed = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                       (std::uint64_t(std::random_device{}()) << 32);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--seconds") {
      seconds = parse_number("--seconds", value);
    } else if (arg == "--threads") {
      threads = parse_number("--threads", value);
    } else if (arg == "--seed") {
      seed = parse_number("--seed", value);
    } else {
      usage(("unknown argument " + arg).c_str());
    }
    ++i;
  }
  if (seconds < 1 || threads < 1 || threads > 1024) usage("--seconds must be at least 1 and --threads 1 to 1024");

  const auto summary = [&](std::uint64_t checks, std::uint64_t mismatches, std::uint64_t errors) {
    char line[256];
    std::snprintf(line, sizeof line, "soak: %llu threads, %llu s, %llu checks, %llu mismatches, %llu errors, seed %llu",
                  static_cast<unsigned long long>(threads), static_cast<unsigned long long>(seconds),
                  static_cast<unsigned long long>(checks), static_cast<unsigned long long>(mismatches),
                  static_cast<unsigned long long>(errors), static_cast<unsigned long long>(seed));
    print_line(line);
  };
  print_line("soak: seed " + std::to_string(seed) + " (replay a thread's choices and data with --seed " +
             std::to_string(seed) + ")");

  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    print_line(std::string("soak: no usable CUDA device (") +
               (found != cudaSuccess ? cudaGetErrorString(found) : "none found") + ")");
    summary(0, 0, 1);
    return 1;
  }
  cudaStream_t shared = nullptr;
  // Blocking, so that it orders with the legacy stream as a plain cudaStreamCreate's does.
  const cudaError_t made = cudaStreamCreateWithFlags(&shared, cudaStreamDefault);
  if (made != cudaSuccess) {
    print_line(std::string("soak: cudaStreamCreateWithFlags (shared stream) failed: ") + cudaGetErrorString(made));
    summary(0, 0, 1);
    return 1;
  }

  const auto start = soak_clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  std::vector<std::unique_ptr<worker>> workers;
  std::vector<std::thread> pool;
  for (std::uint64_t t = 0; t < threads; ++t) {
    auto w = std::make_unique<worker>();
    w->index = int(t);
    w->rng.seed(seed ^ (0x9E3779B97F4A7C15ull * (t + 1)));
    w->shared = shared;
    workers.push_back(std::move(w));
  }
  for (auto& w : workers) pool.emplace_back(run_worker, std::ref(*w), deadline);

  // A thread still busy this long after the deadline is taken to hang: the report says what
  // it was doing, which a timeout around the whole program could not.
  const auto hang_limit = deadline + std::chrono::seconds(60);
  bool all_finished = false;
  while (!all_finished && soak_clock::now() < hang_limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    all_finished = true;
    for (const auto& w : workers) all_finished = all_finished && w->finished.load();
  }

  std::uint64_t checks = 0, mismatches = 0, errors = 0;
  for (const auto& w : workers) {
    checks += w->checks.load();
    mismatches += w->mismatches.load();
    errors += w->errors.load();
  }
  if (!all_finished) {
    for (const auto& w : workers) {
      if (w->finished.load()) continue;
      ++errors;
      print_line("HANG thread " + std::to_string(w->index) + " still busy 60 s after the deadline: " +
                 w->get_current().text());
    }
    summary(checks, mismatches, errors);
    std::_Exit(1);  // the hung threads cannot be joined
  }
  for (auto& t : pool) t.join();

  const cudaError_t destroyed = cudaStreamDestroy(shared);
  const cudaError_t synced = cudaDeviceSynchronize();
  if (destroyed != cudaSuccess || synced != cudaSuccess) {
    ++errors;
    print_line(std::string("soak: at the end: ") + cudaGetErrorString(destroyed != cudaSuccess ? destroyed : synced));
  }
  if (reports_printed.load() > detailed_reports)
    print_line("soak: " + std::to_string(reports_printed.load() - detailed_reports) + " further failures not shown");
  summary(checks, mismatches, errors);
  return checks > 0 && mismatches == 0 && errors == 0 ? 0 : 1;
}
