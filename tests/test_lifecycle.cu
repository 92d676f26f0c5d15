// The runtime under ordinary CUDA usage (docs/lifecycle.md): graphs that outlive their
// capturing stream and run beside direct calls and beside each other, the per-thread default
// stream, one stream shared by many host threads, reused stream handles, device resets,
// errors the application left pending or made sticky, a user's functor that traps, huge
// counting ranges, the single pass's forward-progress fallback, the memory tally keeps,
// managed input, and a capture in global mode beside first-time calls on other threads.
//
// Cases that could hang or abort run in a child process of this program (`test_lifecycle
// --child NAME`) under a timeout: a hang then fails its test instead of stalling CI, and a
// crash fails only its own test. A child also starts with fresh pools, so the resource cases
// can count exactly. A child scenario throws on its first failure; main prints it and exits 1.
#include "support/test_support.cuh"
#include "tally/extrema.cuh"
#include "tally/reduce.cuh"
#include "tally/reduce_by_key.cuh"
#include "tally/scratch.cuh"
#include "tally/transform_reduce.cuh"

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// lifecycle_per_thread.cu, built with --default-stream per-thread: 0 when every answer was
// right, else 1 with the first failure in `message`.
int per_thread_default_stream_case(std::string& message);

namespace {

// ---- child processes ---------------------------------------------------------------------

struct child_result {
  bool exited = false;
  int exit_code = -1;
  bool signaled = false;
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  std::string output;  // stdout and stderr, interleaved
};

bool passed(const child_result& r) { return r.exited && r.exit_code == 0 && !r.signaled && !r.timed_out; }

std::string describe(const std::string& name, const child_result& r) {
  std::ostringstream text;
  text << "child " << name << ": ";
  if (r.timed_out) text << "killed after its timeout (" << r.seconds << " s): a hang; ";
  if (r.exited) text << "exited with " << r.exit_code << "; ";
  if (r.signaled) text << "killed by signal " << r.signal << " (" << strsignal(r.signal) << "); ";
  text << "its output:\n" << (r.output.empty() ? std::string("(none)\n") : r.output);
  return text.str();
}

// Runs this program as `--child NAME`, collecting what it writes, and kills it once
// timeout_seconds have passed.
child_result run_child(const std::string& name, double timeout_seconds) {
  child_result result;
  // Resolved before the fork: between fork and exec the child may only make async-signal-safe
  // calls (the parent has CUDA's threads).
  char exe[4096];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (length <= 0) {
    result.output = "readlink(/proc/self/exe) failed";
    return result;
  }
  exe[length] = '\0';
  std::string flag = "--child";
  std::string scenario = name;
  char* argv[] = {exe, flag.data(), scenario.data(), nullptr};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.output = "pipe2 failed";
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    result.output = "fork failed";
    return result;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copies
    dup2(fds[1], STDERR_FILENO);
    execv(exe, argv);
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  bool pipe_open = true;
  const auto drain = [&] {
    char buffer[4096];
    for (;;) {
      const ssize_t got = read(fds[0], buffer, sizeof buffer);
      if (got > 0) {
        result.output.append(buffer, std::size_t(got));
      } else if (got == 0) {
        pipe_open = false;
        return;
      } else if (errno != EINTR) {
        return;  // EAGAIN: nothing more for now
      }
    }
  };
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  for (;;) {
    // Reading as it runs keeps a chatty child from blocking on a full pipe.
    if (pipe_open) {
      pollfd ready{fds[0], POLLIN, 0};
      poll(&ready, 1, 20);
      drain();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
  }
  if (pipe_open) drain();
  close(fds[0]);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  }
  return result;
}

// ---- failures inside a child -------------------------------------------------------------

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the thread is doing (seed, size, round), appended to a failure's text.
thread_local std::vector<std::string> notes;
class note {
 public:
  explicit note(std::string text) { notes.push_back(std::move(text)); }
  ~note() { notes.pop_back(); }
  note(const note&) = delete;
  note& operator=(const note&) = delete;
};

[[noreturn]] void fail(const std::string& what) {
  std::string text = what;
  for (auto it = notes.rbegin(); it != notes.rend(); ++it) text += "; " + *it;
  throw failure(text);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- the harness's own scenarios (no GPU needed) -------------------------------------------

void harness_passes() { std::printf("harness output on stdout\n"); }

void harness_fails() {
  std::fprintf(stderr, "harness output on stderr\n");
  fail("deliberate failure");
}

void harness_hangs() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

void harness_aborts() {
  const rlimit no_core{0, 0};  // a core dump would only slow the test down
  setrlimit(RLIMIT_CORE, &no_core);
  std::abort();
}

#if !defined(TALLY_TEST_HOST_ONLY)
// ---- device scenarios ----------------------------------------------------------------------

using tally_test::bits_of;
using tally_test::device_buffer;
using tally_test::random_values;
using tally_test::reference_sum;
using tally_test::seeded;
using tally_test::under_sanitizer;

// Children shrink their work under compute-sanitizer as the tests do, but still run slower.
double child_timeout() { return tally_test::under_sanitizer() ? 60 : 30; }

void require(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

void cuda_ok(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    fail(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}
#define LIFECYCLE_CUDA(call) cuda_ok((call), #call)

// Failures of host threads inside a child, reported together once they have joined.
class thread_failures {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    list_.push_back(what);
  }
  void require_none() const {
    if (list_.empty()) return;
    std::string text = std::to_string(list_.size()) + " thread(s) failed:";
    for (const auto& f : list_) text += "\n  " + f;
    fail(text);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> list_;
};

template <class Body>
std::thread checked_thread(thread_failures& failures, std::string who, Body body) {
  return std::thread([&failures, who, body] {
    try {
      body();
    } catch (const std::exception& e) {
      failures.add(who + ": " + e.what());
    }
  });
}

// Lets the threads of a case start their loops together, so that their calls overlap. A
// thread that failed before arriving holds the others back for a few seconds at most.
class start_line {
 public:
  explicit start_line(int threads) : waiting_(threads) {}
  void arrive_and_wait() {
    waiting_.fetch_sub(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (waiting_.load() > 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  }

 private:
  std::atomic<int> waiting_;
};


// An affine map x -> a * x + b on 32-bit words; folding two applies the left one first. The
// composition is associative but not commutative, and exact, so any order-preserving plan
// must give the left fold's bits.
struct affine {
  unsigned a;
  unsigned b;
};
struct then_apply {
  __host__ __device__ affine operator()(const affine& first, const affine& second) const {
    return {second.a * first.a, second.a * first.b + second.b};
  }
};
std::ostream& operator<<(std::ostream& os, const affine& f) { return os << "{" << f.a << ", " << f.b << "}"; }

std::vector<affine> random_affine(std::size_t n, std::mt19937_64& rng) {
  std::vector<affine> v(n);
  for (auto& f : v) {
    const std::uint64_t r = rng();
    f.a = static_cast<unsigned>(r) | 1u;  // odd: the product keeps every earlier map's trace
    f.b = static_cast<unsigned>(r >> 32);
  }
  return v;
}

affine left_fold(const std::vector<affine>& v, std::size_t n, affine init) {
  for (std::size_t i = 0; i < n; ++i) init = then_apply{}(init, v[i]);
  return init;
}

template <class T>
std::string show(const T& x) {
  std::ostringstream text;
  text << std::setprecision(17) << x;
  if constexpr (std::is_floating_point_v<T>) text << " (bits 0x" << std::hex << bits_of(x) << ")";
  return text.str();
}

template <class T>
void require_bits(const T& got, const T& expected, const std::string& what) {
  if (bits_of(got) != bits_of(expected)) fail(what + ": got " + show(got) + ", expected " + show(expected));
}

// The host backend's sum of the first n values: the device's bits for floating point. Checked
// once against the long double sum, so that a wrong host backend cannot hide a wrong device.
template <class T>
T host_sum(const std::vector<T>& v, std::size_t n, T init) {
  const T sum = tally::reduce(tally::host, v.begin(), v.begin() + n, init);
  const double exact = double(reference_sum<T>(v, 0, n, init));
  require(std::abs(double(sum) - exact) <= tally_test::sum_error_bound(v, 0, n, init),
          "the host backend's sum " + show(sum) + " is far from the exact sum " + show(exact));
  return sum;
}

int int_sum(const std::vector<int>& v, std::size_t n, int init) { return reference_sum<int>(v, 0, n, init); }

std::size_t big_n() { return under_sanitizer() ? 70001 : (std::size_t(1) << 20) + 3; }

// Every scratch block the pool allocated and has not freed is one it still lists: a block
// dropped without being freed (a leak, or a call's cached lease that outlived its entry)
// shows as allocated bytes the pool does not hold. Only while no call is running.
void require_no_unlisted_scratch(const std::string& when) {
  const std::size_t allocated = tally::detail::scratch_bytes_allocated();
  const std::size_t listed = tally::detail::scratch_bytes();
  require(allocated == listed, std::to_string(allocated) + " bytes of scratch allocated but " + std::to_string(listed) +
                                   " held by the pool " + when);
}

template <class T>
void upload(T* device, const std::vector<T>& host) {
  LIFECYCLE_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  // A pageable copy may still be landing when cudaMemcpy returns, and non-blocking streams
  // do not wait for the legacy stream.
  LIFECYCLE_CUDA(cudaDeviceSynchronize());
}

class owned_stream {
 public:
  explicit owned_stream(unsigned flags = cudaStreamNonBlocking) {
    LIFECYCLE_CUDA(cudaStreamCreateWithFlags(&stream_, flags));
  }
  ~owned_stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
  void destroy() {
    LIFECYCLE_CUDA(cudaStreamDestroy(stream_));
    stream_ = nullptr;
  }
  operator cudaStream_t() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A device output that is poisoned and read back in the order of one stream, so that threads
// on other streams are not synchronized with (device_value's poison waits for the device).
template <class T>
class out_value {
 public:
  out_value() { LIFECYCLE_CUDA(cudaMalloc(&p_, sizeof(T))); }
  ~out_value() { cudaFree(p_); }
  out_value(const out_value&) = delete;
  out_value& operator=(const out_value&) = delete;
  T* get() const { return p_; }
  void poison(cudaStream_t stream) const { LIFECYCLE_CUDA(cudaMemsetAsync(p_, 0xA5, sizeof(T), stream)); }
  T read(cudaStream_t stream) const {
    T value;
    LIFECYCLE_CUDA(cudaMemcpyAsync(&value, p_, sizeof(T), cudaMemcpyDeviceToHost, stream));
    LIFECYCLE_CUDA(cudaStreamSynchronize(stream));
    return value;
  }

 private:
  T* p_ = nullptr;
};

class captured_graph {
 public:
  captured_graph() = default;
  ~captured_graph() {
    drop_exec();
    if (graph_) cudaGraphDestroy(graph_);
  }
  captured_graph(const captured_graph&) = delete;
  captured_graph& operator=(const captured_graph&) = delete;

  // Captures body()'s work on `stream` in global mode and instantiates it.
  template <class Body>
  void capture(cudaStream_t stream, Body body) {
    LIFECYCLE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    try {
      body();
    } catch (...) {
      cudaGraph_t dropped = nullptr;
      cudaStreamEndCapture(stream, &dropped);
      if (dropped) cudaGraphDestroy(dropped);
      cudaGetLastError();
      throw;
    }
    LIFECYCLE_CUDA(cudaStreamEndCapture(stream, &graph_));
    instantiate();
  }
  void instantiate() { LIFECYCLE_CUDA(cudaGraphInstantiate(&exec_, graph_, 0)); }
  void drop_exec() {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  void launch(cudaStream_t stream) const { LIFECYCLE_CUDA(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

tally::device_policy on(cudaStream_t stream) { return tally::device.on(stream); }

int current_device() {
  int device = -1;
  LIFECYCLE_CUDA(cudaGetDevice(&device));
  return device;
}

// A float and an int input with their references; the graphs' usual content.
struct sum_inputs {
  std::vector<float> vf;
  std::vector<int> vi;
  std::unique_ptr<device_buffer<float>> df;
  std::unique_ptr<device_buffer<int>> di;
  float want_f = 0;
  int want_i = 0;
  static constexpr float init_f = 0.25f;
  static constexpr int init_i = 7;

  sum_inputs(std::size_t n, std::mt19937_64& rng)
      : vf(random_values<float>(n, rng)), vi(random_values<int>(n, rng)) {
    df = std::make_unique<device_buffer<float>>(vf);
    di = std::make_unique<device_buffer<int>>(vi);
    want_f = host_sum(vf, n, init_f);
    want_i = int_sum(vi, n, init_i);
  }
  // New values, so that a replay that wrote nothing or reused an old result is caught.
  void refill(std::mt19937_64& rng) {
    vf = random_values<float>(vf.size(), rng);
    vi = random_values<int>(vi.size(), rng);
    upload(df->data(), vf);
    upload(di->data(), vi);
    want_f = host_sum(vf, vf.size(), init_f);
    want_i = int_sum(vi, vi.size(), init_i);
  }
  void reduce_into(cudaStream_t stream, float* out_f, int* out_i) const {
    tally::reduce_into(on(stream), df->begin(), df->end(), out_f, init_f, tally::plus<float>{});
    tally::reduce_into(on(stream), di->begin(), di->end(), out_i, init_i, tally::plus<int>{});
  }
  void check_direct(cudaStream_t stream, const std::string& what) const {
    require_bits(tally::reduce(on(stream), df->begin(), df->end(), init_f), want_f, what + ": float reduce");
    require_bits(tally::reduce(on(stream), di->begin(), di->end(), init_i), want_i, what + ": int reduce");
  }
};

// ---- graphs ----

void graph_replay_after_capturing_stream_destroyed() {
  seeded s(3201);
  note seed(s.trace());
  sum_inputs in(big_n(), s.rng);
  out_value<float> out_f;
  out_value<int> out_i;
  captured_graph graph;
  auto capturing = std::make_unique<owned_stream>();
  const cudaStream_t old_handle = *capturing;
  graph.capture(*capturing, [&] { in.reduce_into(*capturing, out_f.get(), out_i.get()); });
  capturing->destroy();

  owned_stream reused;  // the driver usually hands out the destroyed stream's handle
  note handle(reused == old_handle ? "the new stream reused the capturing stream's handle"
                                   : "the new stream got a new handle");
  in.check_direct(reused, "a direct call on the new stream");

  // Memory of the application's, allocated now that the capturing stream is gone: a replay
  // that wrote through scratch it does not own would show here.
  const std::size_t words = 1u << 14;
  std::vector<unsigned> pattern(words);
  for (std::size_t i = 0; i < words; ++i) pattern[i] = 0x9E3779B9u * unsigned(i + 1) ^ 0x5bd1e995u;
  unsigned* unrelated = nullptr;
  LIFECYCLE_CUDA(cudaMalloc(&unrelated, words * sizeof(unsigned)));
  upload(unrelated, pattern);

  owned_stream other;
  const int replays = under_sanitizer() ? 3 : 8;
  for (int replay = 0; replay < replays; ++replay) {
    note at("replay " + std::to_string(replay));
    if (replay % 2 == 0 && replay > 0) in.refill(s.rng);
    const cudaStream_t stream = replay % 2 ? cudaStream_t(other) : cudaStream_t(reused);
    out_f.poison(stream);
    out_i.poison(stream);
    graph.launch(stream);
    require_bits(out_f.read(stream), in.want_f, "the replayed float sum");
    require_bits(out_i.read(stream), in.want_i, "the replayed int sum");
    in.check_direct(reused, "a direct call on the new stream after the replay");
  }

  std::vector<unsigned> after(words);
  LIFECYCLE_CUDA(cudaMemcpy(after.data(), unrelated, words * sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::size_t changed = 0, first_changed = words;
  for (std::size_t i = 0; i < words; ++i) {
    if (after[i] == pattern[i]) continue;
    ++changed;
    if (first_changed == words) first_changed = i;
  }
  require(changed == 0, std::to_string(changed) + " words of an unrelated allocation were overwritten, the first at " +
                            std::to_string(first_changed));
  LIFECYCLE_CUDA(cudaFree(unrelated));
}

void graph_replayed_on_another_stream_while_direct_calls_run_on_the_capturing_stream() {
  seeded s(3202);
  note seed(s.trace());
  const std::size_t n = big_n();
  const sum_inputs graphed(n, s.rng);
  const sum_inputs direct(n + 4099, s.rng);
  out_value<float> out_f;
  out_value<int> out_i;
  owned_stream capturing, replaying;
  captured_graph graph;
  graph.capture(capturing, [&] { graphed.reduce_into(capturing, out_f.get(), out_i.get()); });

  const int rounds = under_sanitizer() ? 10 : 200;
  thread_failures failures;
  start_line start(2);
  std::vector<std::thread> threads;
  threads.push_back(checked_thread(failures, "the replaying thread", [&] {
    start.arrive_and_wait();
    for (int r = 0; r < rounds; ++r) {
      note at("replay " + std::to_string(r) + ", " + s.trace());
      out_f.poison(replaying);
      out_i.poison(replaying);
      graph.launch(replaying);
      require_bits(out_f.read(replaying), graphed.want_f, "the replayed float sum");
      require_bits(out_i.read(replaying), graphed.want_i, "the replayed int sum");
    }
  }));
  threads.push_back(checked_thread(failures, "the direct thread", [&] {
    out_value<float> into_f;
    out_value<int> into_i;
    start.arrive_and_wait();
    const auto& d = direct;
    for (int r = 0; r < rounds; ++r) {
      note at("call " + std::to_string(r) + ", " + s.trace());
      switch (r % 4) {
        case 0:
          require_bits(tally::reduce(on(capturing), d.df->begin(), d.df->end(), d.init_f), d.want_f, "float reduce");
          break;
        case 1:
          require_bits(tally::reduce(on(capturing).strategy(tally::strategy::two_pass), d.di->begin(), d.di->end(),
                                     d.init_i),
                       d.want_i, "int two-pass reduce");
          break;
        case 2:
          into_f.poison(capturing);
          tally::reduce_into(on(capturing), d.df->begin(), d.df->end(), into_f.get(), d.init_f, tally::plus<float>{});
          require_bits(into_f.read(capturing), d.want_f, "float reduce_into");
          break;
        default:
          into_i.poison(capturing);
          tally::reduce_into(on(capturing).strategy(tally::strategy::block_atomic), d.di->begin(), d.di->end(),
                             into_i.get(), d.init_i, tally::plus<int>{});
          require_bits(into_i.read(capturing), d.want_i, "int block-atomic reduce_into");
      }
    }
  }));
  for (auto& t : threads) t.join();
  failures.require_none();
}

void two_graphs_of_tally_calls_replayed_concurrently() {
  seeded s(3203);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto v1f = random_values<float>(n, s.rng);
  const auto v1i = random_values<int>(n + 17, s.rng);
  const auto v2d = random_values<double>(n + 33, s.rng);
  const auto v2a = random_affine(n / 2 + 5, s.rng);
  device_buffer<float> d1f(v1f);
  device_buffer<int> d1i(v1i);
  device_buffer<double> d2d(v2d);
  device_buffer<affine> d2a(v2a);
  const float want1f = host_sum(v1f, v1f.size(), 1.5f);
  const int want1i = int_sum(v1i, v1i.size(), -3);
  const double want2d = host_sum(v2d, v2d.size(), -0.5);
  const affine init_a{3, 5};
  const affine want2a = left_fold(v2a, v2a.size(), init_a);
  require_bits(tally::reduce(tally::host, v2a.begin(), v2a.end(), init_a, then_apply{}), want2a,
               "the host backend's ordered fold");
  out_value<float> o1f;
  out_value<int> o1i;
  out_value<double> o2d;
  out_value<affine> o2a;

  owned_stream c1, c2, r1, r2;
  captured_graph g1, g2;
  g1.capture(c1, [&] {
    tally::reduce_into(on(c1), d1f.begin(), d1f.end(), o1f.get(), 1.5f, tally::plus<float>{});
    tally::reduce_into(on(c1).strategy(tally::strategy::block_atomic), d1i.begin(), d1i.end(), o1i.get(), -3,
                       tally::plus<int>{});
  });
  g2.capture(c2, [&] {
    tally::reduce_into(on(c2).strategy(tally::strategy::two_pass), d2d.begin(), d2d.end(), o2d.get(), -0.5,
                       tally::plus<double>{});
    tally::reduce_into(on(c2), d2a.begin(), d2a.end(), o2a.get(), init_a, then_apply{});
  });
  const auto check1 = [&](cudaStream_t stream) {
    require_bits(o1f.read(stream), want1f, "graph 1's float sum");
    require_bits(o1i.read(stream), want1i, "graph 1's int block-atomic sum");
  };
  const auto check2 = [&](cudaStream_t stream) {
    require_bits(o2d.read(stream), want2d, "graph 2's double two-pass sum");
    require_bits(o2a.read(stream), want2a, "graph 2's ordered fold");
  };

  const int rounds = under_sanitizer() ? 5 : 100;
  thread_failures failures;
  start_line start(2);
  std::vector<std::thread> threads;
  threads.push_back(checked_thread(failures, "graph 1's thread", [&] {
    start.arrive_and_wait();
    for (int r = 0; r < rounds; ++r) {
      note at("replay " + std::to_string(r) + ", " + s.trace());
      o1f.poison(r1);
      o1i.poison(r1);
      g1.launch(r1);
      check1(r1);
    }
  }));
  threads.push_back(checked_thread(failures, "graph 2's thread", [&] {
    start.arrive_and_wait();
    for (int r = 0; r < rounds; ++r) {
      note at("replay " + std::to_string(r) + ", " + s.trace());
      o2d.poison(r2);
      o2a.poison(r2);
      g2.launch(r2);
      check2(r2);
    }
  }));
  for (auto& t : threads) t.join();
  failures.require_none();

  // From one thread, both graphs in flight at once before either is waited for.
  for (int r = 0; r < rounds / 4 + 1; ++r) {
    note at("paired replay " + std::to_string(r));
    o1f.poison(r1);
    o1i.poison(r1);
    o2d.poison(r2);
    o2a.poison(r2);
    g1.launch(r1);
    g2.launch(r2);
    check1(r1);
    check2(r2);
  }
}

void graph_holding_two_tally_calls_in_sequence() {
  seeded s(3204);
  note seed(s.trace());
  const std::size_t n = big_n();
  auto vi = random_values<int>(n, s.rng);
  const auto vf = random_values<float>(n + 1000, s.rng);
  const auto va = random_affine(n / 4 + 3, s.rng);
  device_buffer<int> di(vi);
  device_buffer<float> df(vf);
  device_buffer<affine> da(va);
  const std::size_t half = n / 2 + 1;
  const float want_whole = host_sum(vf, vf.size(), 0.0f);
  // The second float call sums the values after the first half: a suffix, not a prefix.
  const std::vector<float> tail(vf.begin() + half, vf.end());
  const float want_tail = host_sum(tail, tail.size(), 2.0f);
  const affine init_a{1, 0};
  const affine want_a = left_fold(va, va.size(), init_a);
  out_value<int> oi;
  out_value<float> of, of_tail;
  out_value<affine> oa;
  owned_stream stream;
  captured_graph graph;
  graph.capture(stream, [&] {
    tally::reduce_into(on(stream).strategy(tally::strategy::single_pass), df.begin(), df.end(), of.get(), 0.0f,
                       tally::plus<float>{});
    tally::reduce_into(on(stream).strategy(tally::strategy::two_pass), di.begin(), di.end(), oi.get(), 11,
                       tally::plus<int>{});
    tally::reduce_into(on(stream), da.begin(), da.end(), oa.get(), init_a, then_apply{});
    tally::reduce_into(on(stream), df.begin() + half, df.end(), of_tail.get(), 2.0f, tally::plus<float>{});
  });
  const int replays = under_sanitizer() ? 2 : 6;
  for (int replay = 0; replay < replays; ++replay) {
    note at("replay " + std::to_string(replay));
    if (replay > 0) {
      vi = random_values<int>(n, s.rng);
      upload(di.data(), vi);
    }
    of.poison(stream);
    oi.poison(stream);
    oa.poison(stream);
    of_tail.poison(stream);
    graph.launch(stream);
    require_bits(of.read(stream), want_whole, "the first call's float sum");
    require_bits(oi.read(stream), int_sum(vi, n, 11), "the second call's int two-pass sum");
    require_bits(oa.read(stream), want_a, "the third call's ordered fold");
    require_bits(of_tail.read(stream), want_tail, "the fourth call's float sum");
  }
}

struct doubled {
  __host__ __device__ int operator()(int x) const { return 2 * x; }
};

// A call that returns its result to the host cannot run inside a capture. Each is refused
// with std::invalid_argument, named after the algorithm the application called, before
// anything is enqueued: the capture stays valid, and a reduce_into captured after the
// refusals replays with the right answer.
void synchronous_calls_refused_inside_a_capture() {
  seeded s(3206);
  note seed(s.trace());
  sum_inputs in(big_n(), s.rng);
  out_value<float> out_f;
  out_value<int> out_i;
  owned_stream capturing;
  captured_graph graph;
  const auto refused = [&](const char* algorithm, auto call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      require(what.rfind(std::string("tally::") + algorithm + ": ", 0) == 0,
              std::string("the refusal does not name tally::") + algorithm + ": " + what);
      require(contains(what, "captured") && contains(what, "reduce_into"),
              "the refusal does not say why or what to use instead: " + what);
      return;
    }
    fail(std::string("tally::") + algorithm + " inside a capture was not refused");
  };
  graph.capture(capturing, [&] {
    const auto policy = on(capturing);
    refused("reduce", [&] { (void)tally::reduce(policy, in.df->begin(), in.df->end(), 0.0f); });
    refused("min_element", [&] { (void)tally::min_element(policy, in.di->begin(), in.di->end()); });
    refused("count", [&] { (void)tally::count(policy, in.di->begin(), in.di->end(), 3); });
    refused("transform_reduce", [&] {
      (void)tally::transform_reduce(policy, in.di->begin(), in.di->end(), doubled{}, 0, tally::plus<int>{});
    });
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    LIFECYCLE_CUDA(cudaStreamIsCapturing(capturing, &status));
    require(status == cudaStreamCaptureStatusActive, "a refused call ended or invalidated the capture");
    in.reduce_into(capturing, out_f.get(), out_i.get());
  });
  for (int replay = 0; replay < 2; ++replay) {
    out_f.poison(capturing);
    out_i.poison(capturing);
    graph.launch(capturing);
    require_bits(out_f.read(capturing), in.want_f, "the replayed float sum");
    require_bits(out_i.read(capturing), in.want_i, "the replayed int sum");
  }
  in.check_direct(capturing, "a direct call after the capture");
}

void graph_reinstantiated_after_its_exec_and_source_stream_are_destroyed() {
  seeded s(3205);
  note seed(s.trace());
  sum_inputs in(big_n(), s.rng);
  out_value<float> out_f;
  out_value<int> out_i;
  auto capturing = std::make_unique<owned_stream>();
  captured_graph graph;
  graph.capture(*capturing, [&] { in.reduce_into(*capturing, out_f.get(), out_i.get()); });
  const auto replay_and_check = [&](cudaStream_t stream, const std::string& what) {
    out_f.poison(stream);
    out_i.poison(stream);
    graph.launch(stream);
    require_bits(out_f.read(stream), in.want_f, what + ": float sum");
    require_bits(out_i.read(stream), in.want_i, what + ": int sum");
  };
  replay_and_check(*capturing, "the first executable graph");
  graph.drop_exec();
  capturing->destroy();

  owned_stream next, other;
  in.check_direct(next, "a direct call on a stream made after the capturing one was destroyed");
  graph.instantiate();  // a graph with memory nodes has one executable graph at a time: a new one now
  for (int replay = 0; replay < 4; ++replay) {
    if (replay == 2) in.refill(s.rng);
    replay_and_check(replay % 2 ? cudaStream_t(other) : cudaStream_t(next),
                     "the second executable graph, replay " + std::to_string(replay));
  }
  in.check_direct(next, "a direct call after the replays");
}

// ---- default streams ----

void per_thread_default_stream() {
  std::string message;
  if (per_thread_default_stream_case(message) != 0) fail(message);
}

// In this translation unit (built without --default-stream per-thread), from many threads:
// tally::device (the legacy stream here), cudaStreamLegacy, nullptr and cudaStreamPerThread
// named explicitly.
void legacy_and_per_thread_streams_named_explicitly_from_many_threads() {
  require(tally::detail::normalize_policy(tally::device).stream() == cudaStreamLegacy,
          "stream 0 resolved to something other than the legacy stream in a translation unit built without "
          "--default-stream per-thread");
  const int threads = 8;
  const int calls = under_sanitizer() ? 4 : 40;
  thread_failures failures;
  start_line start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.push_back(checked_thread(failures, "thread " + std::to_string(t), [&, t] {
      seeded s(3300 + t);
      note seed(s.trace());
      const std::size_t n = big_n() + std::size_t(t) * 4097;
      const auto vi = random_values<int>(n, s.rng);
      const auto vf = random_values<float>(n, s.rng);
      device_buffer<int> di(vi);
      device_buffer<float> df(vf);
      const int want_i = int_sum(vi, n, t);
      const float want_f = host_sum(vf, n, 0.0f);
      out_value<int> out;
      constexpr int batch = 8;
      int* outs = nullptr;
      LIFECYCLE_CUDA(cudaMalloc(&outs, batch * sizeof(int)));
      const tally::device_policy policies[] = {tally::device, tally::device.on(cudaStreamLegacy),
                                               tally::device.on(nullptr), tally::device.on(cudaStreamPerThread)};
      const char* names[] = {"tally::device", "cudaStreamLegacy", "stream nullptr", "cudaStreamPerThread"};
      start.arrive_and_wait();
      for (int c = 0; c < calls; ++c) {
        const int which = (c + t) % 4;
        note at(std::string(names[which]) + ", call " + std::to_string(c));
        const auto policy = policies[which];
        const cudaStream_t stream = which == 3 ? cudaStreamPerThread : cudaStreamLegacy;
        require_bits(tally::reduce(policy, di.begin(), di.end(), t), want_i, "int reduce");
        require_bits(tally::reduce(policy, df.begin(), df.end(), 0.0f), want_f, "float reduce");
        out.poison(stream);
        tally::reduce_into(policy.strategy(c % 2 ? tally::strategy::two_pass : tally::strategy::automatic), di.begin(),
                           di.end(), out.get(), t, tally::plus<int>{});
        require_bits(out.read(stream), want_i, "int reduce_into");
        if (which == 3) {
          // Behind a spin, so that this thread's kernels run together with the other threads'
          // on their per-thread streams.
          LIFECYCLE_CUDA(cudaMemsetAsync(outs, 0xA5, batch * sizeof(int), stream));
          tally_test::keep_stream_busy<><<<1, 1, 0, stream>>>(under_sanitizer() ? 20000 : 400000);
          LIFECYCLE_CUDA(cudaGetLastError());
          for (int k = 0; k < batch; ++k)
            tally::reduce_into(policy, di.begin(), di.end(), outs + k, t + k, tally::plus<int>{});
          int got[batch];
          LIFECYCLE_CUDA(cudaMemcpyAsync(got, outs, sizeof got, cudaMemcpyDeviceToHost, stream));
          LIFECYCLE_CUDA(cudaStreamSynchronize(stream));
          for (int k = 0; k < batch; ++k)
            require_bits(got[k], int(unsigned(want_i) + unsigned(k)),  // wraps as the device's sum does
                         "int reduce_into " + std::to_string(k) + " of a batch");
        }
      }
      LIFECYCLE_CUDA(cudaFree(outs));
    }));
  }
  for (auto& w : workers) w.join();
  failures.require_none();
}

// ---- reused stream handles ----

// The driver hands a destroyed stream's handle to the next stream made, while the destroyed
// stream's work is still queued. First every round's calls wait for one event behind a long
// spin and their stream is destroyed at once, so that all of them run together when the spin
// ends; then rounds that each wait behind a spin of their own, with a call that waits for its
// value.
void stream_handles_reused_after_destroy() {
  const bool light = under_sanitizer();
  const int rounds = light ? 4 : 24;
  seeded s(4101);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vf = random_values<float>(n, s.rng);
  const auto vi = random_values<int>(n, s.rng);
  device_buffer<float> df(vf);
  device_buffer<int> di(vi);
  std::vector<float> want_f(rounds);
  for (int r = 0; r < rounds; ++r) want_f[r] = host_sum(vf, n, 0.5f * r);
  float* outs_f = nullptr;
  int* outs_i = nullptr;
  LIFECYCLE_CUDA(cudaMalloc(&outs_f, rounds * sizeof(float)));
  LIFECYCLE_CUDA(cudaMalloc(&outs_i, rounds * sizeof(int)));
  std::set<cudaStream_t> handles;
  for (const bool gated : {true, false}) {
    note phase(gated ? "every round released at once" : "rounds behind spins of their own");
    LIFECYCLE_CUDA(cudaMemset(outs_f, 0xA5, rounds * sizeof(float)));
    LIFECYCLE_CUDA(cudaMemset(outs_i, 0xA5, rounds * sizeof(int)));
    LIFECYCLE_CUDA(cudaDeviceSynchronize());
    owned_stream gate;
    cudaEvent_t released = nullptr;
    LIFECYCLE_CUDA(cudaEventCreateWithFlags(&released, cudaEventDisableTiming));
    if (gated) {
      tally_test::keep_stream_busy<><<<1, 1, 0, gate>>>(light ? 2000000 : 40000000);  // ~20 ms at 2 GHz
      LIFECYCLE_CUDA(cudaGetLastError());
    }
    LIFECYCLE_CUDA(cudaEventRecord(released, gate));
    for (int r = 0; r < rounds; ++r) {
      note at("round " + std::to_string(r));
      cudaStream_t stream = nullptr;
      // Blocking and non-blocking streams both.
      LIFECYCLE_CUDA(cudaStreamCreateWithFlags(&stream, r % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
      handles.insert(stream);
      if (gated) {
        LIFECYCLE_CUDA(cudaStreamWaitEvent(stream, released, 0));
      } else {
        tally_test::keep_stream_busy<><<<1, 1, 0, stream>>>(light ? 100000 : 2000000);
        LIFECYCLE_CUDA(cudaGetLastError());
      }
      tally::reduce_into(on(stream), df.begin(), df.end(), outs_f + r, 0.5f * r, tally::plus<float>{});
      tally::reduce_into(on(stream).strategy(tally::strategy::two_pass), di.begin(), di.end(), outs_i + r, r,
                         tally::plus<int>{});
      if (!gated && r % 3 == 0)  // a call that waits for its value, behind the others
        require_bits(tally::reduce(on(stream), di.begin(), di.end(), -r), int_sum(vi, n, -r), "int reduce");
      LIFECYCLE_CUDA(cudaStreamDestroy(stream));
    }
    LIFECYCLE_CUDA(cudaDeviceSynchronize());
    LIFECYCLE_CUDA(cudaEventDestroy(released));
    std::vector<float> got_f(rounds);
    std::vector<int> got_i(rounds);
    LIFECYCLE_CUDA(cudaMemcpy(got_f.data(), outs_f, rounds * sizeof(float), cudaMemcpyDeviceToHost));
    LIFECYCLE_CUDA(cudaMemcpy(got_i.data(), outs_i, rounds * sizeof(int), cudaMemcpyDeviceToHost));
    note reuse(std::to_string(handles.size()) + " distinct handles so far");
    for (int r = 0; r < rounds; ++r) {
      note at("round " + std::to_string(r));
      require_bits(got_f[r], want_f[r], "float reduce_into on a destroyed stream");
      require_bits(got_i[r], int_sum(vi, n, r), "int two-pass reduce_into on a destroyed stream");
    }
  }
  std::printf("%zu distinct stream handles in %d streams\n", handles.size(), 2 * rounds);
  LIFECYCLE_CUDA(cudaFree(outs_f));
  LIFECYCLE_CUDA(cudaFree(outs_i));
}

// ---- one stream, many threads ----

// Threads share one stream and interleave every strategy, reduce and reduce_into, and an
// ordered operator; outputs are poisoned and read in the stream's order.
void many_threads_on_one_stream(cudaStream_t stream, std::uint64_t salt) {
  seeded s(salt);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  const auto vf = random_values<float>(n + 5, s.rng);
  const auto va = random_affine(n / 4 + 7, s.rng);
  device_buffer<int> di(vi);
  device_buffer<float> df(vf);
  device_buffer<affine> da(va);
  const int sum0 = int_sum(vi, n, 0);
  const float want_f = host_sum(vf, vf.size(), -1.0f);
  const affine init_a{5, 9};
  const affine want_a = left_fold(va, va.size(), init_a);

  const int threads = 8;
  const int iterations = under_sanitizer() ? 4 : 48;
  thread_failures failures;
  start_line start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.push_back(checked_thread(failures, "thread " + std::to_string(t), [&, t] {
      out_value<int> oi;
      out_value<float> of;
      out_value<affine> oa;
      const int want_i = int(unsigned(sum0) + unsigned(t));  // wraps as the device's sum does
      const auto policy = on(stream);
      using tally::strategy;
      start.arrive_and_wait();
      for (int it = 0; it < iterations; ++it) {
        const int which = (it + t) % 8;
        note at("iteration " + std::to_string(it) + ", case " + std::to_string(which) + ", " + s.trace());
        switch (which) {
          case 0:
            require_bits(tally::reduce(policy, di.begin(), di.end(), t), want_i, "int reduce, default strategy");
            break;
          case 1:
            oi.poison(stream);
            tally::reduce_into(policy.strategy(strategy::two_pass), di.begin(), di.end(), oi.get(), t,
                               tally::plus<int>{});
            require_bits(oi.read(stream), want_i, "int reduce_into, two pass");
            break;
          case 2:
            require_bits(tally::reduce(policy.strategy(strategy::block_atomic), di.begin(), di.end(), t), want_i,
                         "int reduce, block atomic");
            break;
          case 3:
            oi.poison(stream);
            tally::reduce_into(policy.strategy(strategy::warp_atomic), di.begin(), di.end(), oi.get(), t,
                               tally::plus<int>{});
            require_bits(oi.read(stream), want_i, "int reduce_into, warp atomic");
            break;
          case 4:
            require_bits(tally::reduce(policy.strategy(strategy::single_pass), df.begin(), df.end(), -1.0f), want_f,
                         "float reduce, single pass");
            break;
          case 5:
            of.poison(stream);
            tally::reduce_into(policy.strategy(strategy::two_pass), df.begin(), df.end(), of.get(), -1.0f,
                               tally::plus<float>{});
            require_bits(of.read(stream), want_f, "float reduce_into, two pass");
            break;
          case 6:
            require_bits(tally::reduce(policy, da.begin(), da.end(), init_a, then_apply{}), want_a,
                         "ordered reduce, default strategy");
            break;
          default:
            oa.poison(stream);
            tally::reduce_into(policy.strategy(strategy::two_pass), da.begin(), da.end(), oa.get(), init_a,
                               then_apply{});
            require_bits(oa.read(stream), want_a, "ordered reduce_into, two pass");
        }
      }
    }));
  }
  for (auto& w : workers) w.join();
  failures.require_none();
}

void one_stream_many_threads_every_strategy() {
  owned_stream shared;
  many_threads_on_one_stream(shared, 3401);
}

void one_legacy_stream_many_threads_every_strategy() { many_threads_on_one_stream(cudaStreamLegacy, 3402); }

// ---- device reset ----

// Allocates the input anew (a reset freed everything) and checks calls on the legacy stream,
// a new stream and the per-thread stream.
void calls_work_in_the_current_context(const std::vector<int>& vi, const std::vector<float>& vf, int want_i,
                                       float want_f, const std::string& when) {
  note at(when);
  const std::size_t n = vi.size();
  int* di = nullptr;
  float* df = nullptr;
  int* out = nullptr;
  LIFECYCLE_CUDA(cudaMalloc(&di, n * sizeof(int)));
  LIFECYCLE_CUDA(cudaMalloc(&df, n * sizeof(float)));
  LIFECYCLE_CUDA(cudaMalloc(&out, sizeof(int)));
  upload(di, vi);
  upload(df, vf);
  cudaStream_t stream = nullptr;
  LIFECYCLE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  require_bits(tally::reduce(tally::device, di, di + n, 3), want_i, "int reduce on the legacy stream");
  require_bits(tally::reduce(on(stream), df, df + n, 0.5f), want_f, "float reduce on a new stream");
  LIFECYCLE_CUDA(cudaMemsetAsync(out, 0xA5, sizeof(int), stream));
  tally::reduce_into(on(stream).strategy(tally::strategy::two_pass), di, di + n, out, 3, tally::plus<int>{});
  int got = 0;
  LIFECYCLE_CUDA(cudaMemcpyAsync(&got, out, sizeof(int), cudaMemcpyDeviceToHost, stream));
  LIFECYCLE_CUDA(cudaStreamSynchronize(stream));
  require_bits(got, want_i, "int two-pass reduce_into on a new stream");
  require_bits(tally::reduce(on(cudaStreamPerThread).strategy(tally::strategy::block_atomic), di, di + n, 3), want_i,
               "int block-atomic reduce on the per-thread stream");
  LIFECYCLE_CUDA(cudaStreamDestroy(stream));
  LIFECYCLE_CUDA(cudaFree(di));
  LIFECYCLE_CUDA(cudaFree(df));
  LIFECYCLE_CUDA(cudaFree(out));
}

void device_reset_then_calls_work() {
  seeded s(3501);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  const auto vf = random_values<float>(n, s.rng);
  const int want_i = int_sum(vi, n, 3);
  const float want_f = host_sum(vf, n, 0.5f);

  // A thread whose per-thread stream has scratch in the old context, and which calls again
  // and exits after the reset.
  std::promise<void> used, reset_done;
  auto used_future = used.get_future();
  auto reset_future = reset_done.get_future().share();
  std::string thread_failure;
  std::thread other([&] {
    bool signalled = false;
    try {
      note who("the other thread");
      int* d = nullptr;
      LIFECYCLE_CUDA(cudaMalloc(&d, n * sizeof(int)));
      upload(d, vi);
      require_bits(tally::reduce(on(cudaStreamPerThread), d, d + n, 3), want_i, "reduce before the reset");
      LIFECYCLE_CUDA(cudaFree(d));
      used.set_value();
      signalled = true;
      reset_future.wait();
      LIFECYCLE_CUDA(cudaMalloc(&d, n * sizeof(int)));
      upload(d, vi);
      require_bits(tally::reduce(on(cudaStreamPerThread), d, d + n, 3), want_i, "reduce after the reset");
      LIFECYCLE_CUDA(cudaFree(d));
    } catch (const std::exception& e) {
      thread_failure = e.what();
      if (!signalled) used.set_value();
    }
  });

  calls_work_in_the_current_context(vi, vf, want_i, want_f, "before the reset");
  used_future.wait();
  const auto before = tally::scratch_held();
  LIFECYCLE_CUDA(cudaDeviceReset());
  calls_work_in_the_current_context(vi, vf, want_i, want_f, "after cudaDeviceReset");
  reset_done.set_value();
  other.join();
  require(thread_failure.empty(), thread_failure);
  // The new context has blocks for the legacy stream, the new stream and this thread's
  // per-thread stream; the other thread's went when it exited. The old context's are gone.
  const auto after = tally::scratch_held();
  require(after.streams <= 3, "scratch_held() counts " + std::to_string(after.streams) +
                                  " stream blocks after the reset (before it: " + std::to_string(before.streams) +
                                  "): the reset context's blocks are still counted");
  tally::release_scratch();
  require(tally::scratch_held().streams == 0, "release_scratch() after a reset left blocks");
  calls_work_in_the_current_context(vi, vf, want_i, want_f, "after release_scratch");
}

void device_reset_between_calls_in_a_loop() {
  seeded s(3502);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  const int want = int_sum(vi, n, 5);
  for (int round = 0; round < 4; ++round) {
    note at("round " + std::to_string(round));
    int* d = nullptr;
    int* out = nullptr;
    LIFECYCLE_CUDA(cudaMalloc(&d, n * sizeof(int)));
    LIFECYCLE_CUDA(cudaMalloc(&out, sizeof(int)));
    upload(d, vi);
    require_bits(tally::reduce(tally::device, d, d + n, 5), want, "reduce on the legacy stream");
    cudaStream_t stream = nullptr;
    LIFECYCLE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    LIFECYCLE_CUDA(cudaMemsetAsync(out, 0xA5, sizeof(int), stream));
    tally::reduce_into(on(stream), d, d + n, out, 5, tally::plus<int>{});
    int got = 0;
    LIFECYCLE_CUDA(cudaMemcpyAsync(&got, out, sizeof(int), cudaMemcpyDeviceToHost, stream));
    LIFECYCLE_CUDA(cudaStreamSynchronize(stream));
    require_bits(got, want, "reduce_into on a new stream");
    require_bits(tally::reduce(on(stream).strategy(tally::strategy::two_pass), d, d + n, 5), want,
                 "two-pass reduce on a new stream");
    // Counted only after a call: the pools learn of a reset at the next call.
    require(tally::scratch_held().streams <= 2, "blocks of reset contexts are still counted: " +
                                                    std::to_string(tally::scratch_held().streams));
    LIFECYCLE_CUDA(cudaStreamDestroy(stream));
    LIFECYCLE_CUDA(cudaFree(d));
    LIFECYCLE_CUDA(cudaFree(out));
    if (round == 2) tally::release_scratch();
    LIFECYCLE_CUDA(cudaDeviceReset());
  }
  int* d = nullptr;
  LIFECYCLE_CUDA(cudaMalloc(&d, n * sizeof(int)));
  upload(d, vi);
  require_bits(tally::reduce(tally::device, d, d + n, 5), want, "reduce after the last reset");
  LIFECYCLE_CUDA(cudaFree(d));
  require_no_unlisted_scratch("after the resets: the ended contexts' blocks are forgotten");
}

// ---- two devices ----

int device_count_or_zero() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Host threads on two devices at once, each on streams of its own device; a graph captured on
// device 1 and replayed, after its capturing stream is gone, while device 0's threads run;
// then device 1 is reset: device 0's calls, and its scratch, are untouched, and device 1
// works again in its new context. Scratch is keyed by context, so no device can borrow
// another's block, and forgetting one context forgets nothing of the other's.
void two_devices_threads_graphs_and_a_device_reset() {
  require(device_count_or_zero() >= 2, "this case needs two CUDA devices");
  seeded s(3601);
  note seed(s.trace());
  const std::size_t n = big_n();
  std::vector<std::unique_ptr<sum_inputs>> inputs;
  for (int device = 0; device < 2; ++device) {
    LIFECYCLE_CUDA(cudaSetDevice(device));
    inputs.push_back(std::make_unique<sum_inputs>(n + std::size_t(device) * 11, s.rng));
  }
  {
    LIFECYCLE_CUDA(cudaSetDevice(1));
    out_value<float> out_f;
    out_value<int> out_i;
    captured_graph graph;
    auto capturing = std::make_unique<owned_stream>();
    graph.capture(*capturing, [&] { inputs[1]->reduce_into(*capturing, out_f.get(), out_i.get()); });
    capturing->destroy();
    owned_stream replaying;

    thread_failures failures;
    const int threads_per_device = 2;
    start_line line(2 * threads_per_device);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int device = 0; device < 2; ++device)
      for (int t = 0; t < threads_per_device; ++t)
        threads.push_back(checked_thread(failures, "device " + std::to_string(device) + " thread " + std::to_string(t),
                                         [&, device, t] {
                                           LIFECYCLE_CUDA(cudaSetDevice(device));
                                           owned_stream mine;
                                           const cudaStream_t stream = t == 0 ? cudaStream_t(mine) : cudaStreamPerThread;
                                           line.arrive_and_wait();
                                           for (int call = 0; call < 12 || (device == 0 && !stop.load()); ++call)
                                             inputs[device]->check_direct(stream, "call " + std::to_string(call));
                                         }));
    // Device 1's graph replays while the threads of both devices call tally directly.
    std::string replay_failure;
    try {
      for (int replay = 0; replay < 6; ++replay) {
        note at("replay " + std::to_string(replay) + " on device 1");
        out_f.poison(replaying);
        out_i.poison(replaying);
        graph.launch(replaying);
        require_bits(out_f.read(replaying), inputs[1]->want_f, "the replayed float sum");
        require_bits(out_i.read(replaying), inputs[1]->want_i, "the replayed int sum");
      }
    } catch (const std::exception& e) {
      replay_failure = e.what();
    }
    stop = true;
    for (auto& thread : threads) thread.join();
    failures.require_none();
    require(replay_failure.empty(), replay_failure);
  }

  // Device 1's inputs go before its context does; device 0's stay and must still reduce.
  LIFECYCLE_CUDA(cudaSetDevice(1));
  inputs[1].reset();
  LIFECYCLE_CUDA(cudaDeviceReset());
  LIFECYCLE_CUDA(cudaSetDevice(0));
  owned_stream on_0;
  inputs[0]->check_direct(on_0, "device 0 after device 1 was reset");
  inputs[0]->check_direct(cudaStreamLegacy, "device 0's legacy stream after device 1 was reset");
  LIFECYCLE_CUDA(cudaSetDevice(1));
  sum_inputs fresh(n + 5, s.rng);
  owned_stream on_1;
  fresh.check_direct(on_1, "device 1 in its new context");
  fresh.check_direct(cudaStreamPerThread, "device 1's per-thread stream in its new context");
  LIFECYCLE_CUDA(cudaSetDevice(0));
  inputs[0]->check_direct(on_0, "device 0 after device 1 worked again");
}

// ---- errors ----

void require_tally_message(const std::string& what, cudaError_t code, const std::string& algorithm) {
  require(what.rfind("tally::" + algorithm + ": ", 0) == 0, "the message does not start with the algorithm: " + what);
  require(contains(what, "cudaError"), "the message names no CUDA error: " + what);
  require(contains(what, cudaGetErrorName(code)), "the message does not name the error it carries: " + what);
  require(!what.empty() && what.back() == '.', "the message is not a sentence ending with '.': " + what);
  for (const char* source : {"!=", "?", ".cuh", ".cpp"})
    require(!contains(what, source), std::string("the message shows source text (") + source + "): " + what);
}

void error_left_pending_by_the_application() {
  seeded s(3601);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  const auto small = random_values<int>(1000, s.rng);
  const auto vf = random_values<float>(n, s.rng);
  device_buffer<int> di(vi), ds(small);
  device_buffer<float> df(vf);
  const int want_i = int_sum(vi, n, 2);
  const int want_small = int_sum(small, small.size(), 2);
  const float want_f = host_sum(vf, n, 0.5f);
  owned_stream stream;
  out_value<int> out;
  const int device = current_device();
  // First with nothing of tally's allocated yet (the first calls of this process), then with
  // the pools warm.
  for (int round = 0; round < 2; ++round) {
    note at(round == 0 ? "the process's first tally calls" : "tally calls with warm pools");
    const cudaError_t refused = cudaSetDevice(9999);
    require(refused == cudaErrorInvalidDevice,
            std::string("cudaSetDevice(9999) returned ") + cudaGetErrorName(refused) + ", not cudaErrorInvalidDevice");
    require(cudaPeekAtLastError() == cudaErrorInvalidDevice, "the failed cudaSetDevice left no error pending");
    try {
      require_bits(tally::reduce(tally::device, di.begin(), di.end(), 2), want_i, "int reduce");
      require_bits(tally::reduce(tally::device, ds.begin(), ds.end(), 2), want_small, "one-tile int reduce");
      require_bits(tally::reduce(on(stream), df.begin(), df.end(), 0.5f), want_f, "float reduce on a user stream");
      require_bits(tally::reduce(on(stream).strategy(tally::strategy::block_atomic), di.begin(), di.end(), 2), want_i,
                   "int block-atomic reduce");
      out.poison(stream);
      tally::reduce_into(on(stream).strategy(tally::strategy::two_pass), di.begin(), di.end(), out.get(), 2,
                         tally::plus<int>{});
      require_bits(out.read(stream), want_i, "int two-pass reduce_into");
    } catch (const tally::cuda_error& e) {
      fail(std::string("tally threw for an error the application left pending: ") + e.what());
    }
    const cudaError_t pending = cudaGetLastError();
    require(pending == cudaErrorInvalidDevice, std::string("after tally's calls the pending error is ") +
                                                   cudaGetErrorName(pending) +
                                                   ": tally cleared or replaced the application's cudaErrorInvalidDevice");
    require(cudaGetLastError() == cudaSuccess, "cudaGetLastError did not clear the error");
    require(current_device() == device, "the current device changed");
  }
}

void a_real_cuda_error_message() {
  seeded s(3602);
  note seed(s.trace());
  const auto vi = random_values<int>(big_n(), s.rng);
  device_buffer<int> di(vi);
  const int want = int_sum(vi, vi.size(), 0);
  owned_stream stream;
  require_bits(tally::reduce(on(stream), di.begin(), di.end(), 0), want, "reduce before the capture");

  // reduce() must wait for its value, which a stream being captured never produces. A call
  // that needs scratch is refused before it enqueues anything (synchronous_calls_refused_
  // inside_a_capture); one of a single tile enqueues its kernel and fails in its wait, with
  // the CUDA error of asking a capturing stream, which is the real error wanted here.
  const std::size_t one_tile = 1000;
  LIFECYCLE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  std::string what, other;
  cudaError_t code = cudaSuccess;
  bool threw = false;
  try {
    (void)tally::reduce(on(stream), di.begin(), di.begin() + one_tile, 0);
  } catch (const tally::cuda_error& e) {
    threw = true;
    what = e.what();
    code = e.code();
  } catch (const std::exception& e) {
    other = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();
  require(other.empty(), "reduce inside a capture threw something other than tally::cuda_error: " + other);
  require(threw, "reduce inside a capture returned a value it cannot have");
  require(code != cudaSuccess, "the tally::cuda_error carries cudaSuccess");
  require_tally_message(what, code, "reduce");
  // The capture was invalidated by the call's wait.
  require(ended == cudaErrorStreamCaptureInvalidated || ended == cudaSuccess,
          std::string("cudaStreamEndCapture returned ") + cudaGetErrorName(ended));

  require_bits(tally::reduce(on(stream), di.begin(), di.end(), 0), want, "reduce on the stream after its capture");
  owned_stream fresh;
  require_bits(tally::reduce(on(fresh), di.begin(), di.end(), 0), want, "reduce on a new stream");
  require_bits(tally::reduce(tally::device, di.begin(), di.end(), 0), want, "reduce on the legacy stream");
}

__global__ void trap_kernel() { __trap(); }

// docs/errors.md: a sticky error (the context is lost) makes tally's own calls fail, and they
// throw with that error. The process must still end cleanly.
void sticky_error_makes_calls_throw_it() {
  seeded s(3603);
  note seed(s.trace());
  const auto vi = random_values<int>(big_n(), s.rng);
  device_buffer<int> di(vi);
  owned_stream stream;
  out_value<int> out;
  const int want = int_sum(vi, vi.size(), 0);
  require_bits(tally::reduce(tally::device, di.begin(), di.end(), 0), want, "reduce before the error");
  require_bits(tally::reduce(on(stream), di.begin(), di.end(), 0), want, "reduce on a stream before the error");
  trap_kernel<<<1, 1, 0, stream>>>();
  const cudaError_t lost = cudaDeviceSynchronize();
  require(lost != cudaSuccess, "the trapping kernel did not fail");
  const auto expect_throw = [&](const char* what, const std::string& algorithm, auto call) {
    note at(what);
    try {
      call();
    } catch (const tally::cuda_error& e) {
      require(e.code() == lost, std::string("tally::cuda_error carries ") + cudaGetErrorName(e.code()) +
                                    ", not the sticky " + cudaGetErrorName(lost));
      require_tally_message(e.what(), lost, algorithm);
      return;
    } catch (const std::exception& e) {
      fail(std::string("threw something other than tally::cuda_error: ") + e.what());
    }
    fail("returned normally in a lost context");
  };
  expect_throw("reduce on the legacy stream", "reduce", [&] { (void)tally::reduce(tally::device, di.begin(), di.end(), 0); });
  expect_throw("reduce on the stream", "reduce", [&] { (void)tally::reduce(on(stream), di.begin(), di.end(), 0); });
  expect_throw("reduce_into on the stream", "reduce_into", [&] {
    tally::reduce_into(on(stream), di.begin(), di.end(), out.get(), 0, tally::plus<int>{});
  });
}

// A user's functor that executes __trap() inside a tally call, as a failed device-side check
// does: the kernel dies and the CUDA context with it. docs/errors.md: the call throws
// tally::cuda_error, a sentence that names the algorithm and the CUDA error and says that the
// context is lost; it must not wait forever for a value the kernel never hands over (the
// parent's timeout catches that). The child only reports: nothing more can run in a lost
// context, so it makes no further CUDA call.
template <class Call>
void expect_trap_reported(const std::string& algorithm, Call call) {
  try {
    call();
  } catch (const tally::cuda_error& e) {
    const std::string what = e.what();
    require(e.code() != cudaSuccess, "the tally::cuda_error carries cudaSuccess: " + what);
    require_tally_message(what, e.code(), algorithm);
    require(contains(what, "context is lost"), "the message does not say that the context is lost: " + what);
    std::printf("reported: %s\n", what.c_str());
    return;
  } catch (const std::exception& e) {
    fail(std::string("threw something other than tally::cuda_error: ") + e.what());
  }
  fail("returned normally although the functor trapped");
}

// Traps where it meets the index `at` (a __host__ __device__ transform, as
// thrust::transform_iterator needs; the host side never runs under a device policy).
struct trap_at_index {
  unsigned long long at;
  __host__ __device__ unsigned long long operator()(unsigned long long i) const {
#if defined(__CUDA_ARCH__)
    if (i == at) __trap();
#endif
    return i;
  }
};

// Traps on one value of the input.
struct trap_at_value {
  int value;
  __host__ __device__ long long operator()(int x) const {
#if defined(__CUDA_ARCH__)
    if (x == value) __trap();
#endif
    return x;
  }
};

void trapping_functor_in_transform_reduce() {
  const unsigned long long n = big_n();
  const thrust::counting_iterator<unsigned long long> first(0);
  expect_trap_reported("transform_reduce", [&] {
    (void)tally::transform_reduce(tally::device, first, first + n, trap_at_index{n / 2}, 0ull,
                                  tally::plus<unsigned long long>{});
  });
}

// The transform read through tally::reduce, over device memory, with one element that traps.
void trapping_functor_in_reduce() {
  seeded s(3604);
  note seed(s.trace());
  auto vi = random_values<int>(big_n(), s.rng);  // within +-10^6
  const int trigger = -2000000000;
  vi[vi.size() / 3] = trigger;
  device_buffer<int> di(vi);
  const auto first = thrust::make_transform_iterator(di.begin(), trap_at_value{trigger});
  expect_trap_reported("reduce", [&] {
    (void)tally::reduce(tally::device, first, first + static_cast<std::ptrdiff_t>(vi.size()), 0ll,
                        tally::plus<long long>{});
  });
}

// ---- limits ----

// 0 + 1 + ... + (n - 1) modulo 2^64, without overflow before the reduction.
unsigned long long triangular(unsigned long long n) { return n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2); }

struct three_x_plus_one {
  __host__ __device__ unsigned long long operator()(unsigned long long i) const { return 3 * i + 1; }
};

// Prints the sum of 2^62 counted values, or that it was refused. It cannot finish in
// seconds on any GPU; the parent kills it.
void huge_counting_range() {
  const thrust::counting_iterator<unsigned long long> first(0);
  try {
    const unsigned long long sum = tally::reduce(tally::device, first, first + (1ll << 62));
    std::printf("sum %llu\n", sum);
  } catch (const std::invalid_argument& e) {
    std::printf("refused with std::invalid_argument: %s\n", e.what());
  }
  std::fflush(stdout);
}

// ---- forward progress ----

class fold_poll_guard {
 public:
  explicit fold_poll_guard(unsigned polls) : previous_(tally::detail::fold_poll_limit()) {
    tally::detail::set_fold_poll_limit(polls);
  }
  ~fold_poll_guard() { tally::detail::set_fold_poll_limit(previous_); }
  fold_poll_guard(const fold_poll_guard&) = delete;
  fold_poll_guard& operator=(const fold_poll_guard&) = delete;

 private:
  unsigned previous_;
};

struct fold_shape {
  std::size_t n;
  unsigned grid;  // 0: sized from the device
};

std::string shape_text(const fold_shape& shape) {
  return "n " + std::to_string(shape.n) + (shape.grid ? ", grid " + std::to_string(shape.grid) : "");
}

template <class T>
void single_pass_shapes_match(const device_buffer<T>& d, const std::vector<fold_shape>& shapes, const std::vector<T>& want,
                              T init, cudaStream_t stream, const out_value<T>& out) {
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    note at(shape_text(shapes[i]));
    const auto policy = on(stream).strategy(tally::strategy::single_pass).grid_size(shapes[i].grid);
    require_bits(tally::reduce(policy, d.begin(), d.begin() + shapes[i].n, init), want[i], "reduce");
    out.poison(stream);
    tally::reduce_into(policy, d.begin(), d.begin() + shapes[i].n, out.get(), init, tally::plus<T>{});
    require_bits(out.read(stream), want[i], "reduce_into");
  }
}

// Views take block 0's fallback inlined, plain elements out of line
// (kernels/reduce_kernels.cuh, refolds_out_of_line): both paths run below.
struct squared_value {
  __host__ __device__ float operator()(float x) const { return x * x; }
};
struct counts_below_half {
  __host__ __device__ long long operator()(float x) const { return x < 0.5f ? 1 : 0; }
};

void forward_progress_fallback_fold() {
  const bool light = under_sanitizer();
  seeded s(3701);
  note seed(s.trace());
  // From 3 tiles to the plan's 2048 (tiles of 8192 floats or 4096 doubles), both roles of
  // block 0, grids too small to hold every tile at once, and grids too large to be resident
  // at once. With a poll limit of 1, block 0's first wait for an unpublished cell runs out,
  // so it reduces the tiles it has not seen itself, racing the tile blocks that publish the
  // same cells (partials.cuh, fold_sync); every answer must keep its bits.
  const std::vector<fold_shape> float_shapes =
      light ? std::vector<fold_shape>{{(1u << 14) + 1, 0}, {(1u << 17) + 7, 0}, {(1u << 18) + 3, 0}, {1u << 18, 4}, {1u << 18, 1},
                                      {(1u << 22) + 9, 4096}}
            : std::vector<fold_shape>{{(1u << 14) + 1, 0}, {(1u << 17) + 7, 0}, {(1u << 20) + 3, 0}, {1u << 24, 0},
                                      {(1u << 24) + 5, 0}, {1u << 22, 4},       {1u << 22, 1},       {(1u << 22) + 9, 4096},
                                      {(1u << 24) + 5, 8192}};
  const std::vector<fold_shape> double_shapes =
      light ? std::vector<fold_shape>{{(1u << 13) + 1, 0}, {(1u << 17) + 7, 0}, {(1u << 18) + 3, 0}, {1u << 18, 4}, {1u << 18, 1}}
            : std::vector<fold_shape>{{(1u << 13) + 1, 0}, {(1u << 17) + 7, 0}, {(1u << 20) + 3, 0}, {1u << 23, 0},
                                      {(1u << 24) + 5, 0}, {1u << 22, 4},       {1u << 22, 1},       {(1u << 22) + 3, 4096}};
  // The ordered plan's tiles hold 4096 maps; one or two tiles take a kernel without scratch.
  const std::vector<fold_shape> affine_shapes =
      light ? std::vector<fold_shape>{{3 * 4096 + 5, 0}, {(1u << 16) + 7, 0}, {1u << 16, 3}}
            : std::vector<fold_shape>{{3 * 4096 + 5, 0}, {(1u << 17) + 7, 0}, {(1u << 20) + 3, 0}, {1u << 20, 3},
                                      {(1u << 22) + 3, 4096}};
  const auto largest = [](const std::vector<fold_shape>& shapes) {
    std::size_t n = 0;
    for (const auto& shape : shapes) n = std::max(n, shape.n);
    return n;
  };
  const auto vf = random_values<float>(largest(float_shapes), s.rng);
  const auto vd = random_values<double>(largest(double_shapes), s.rng);
  const auto va = random_affine(largest(affine_shapes), s.rng);
  device_buffer<float> df(vf);
  device_buffer<double> dd(vd);
  device_buffer<affine> da(va);
  const float init_f = 0.5f;
  const double init_d = -0.25;
  const affine init_a{7, 3};
  std::vector<float> want_f;
  std::vector<double> want_d;
  std::vector<affine> want_a;
  for (const auto& shape : float_shapes) want_f.push_back(host_sum(vf, shape.n, init_f));
  for (const auto& shape : double_shapes) want_d.push_back(host_sum(vd, shape.n, init_d));
  for (const auto& shape : affine_shapes) {
    want_a.push_back(left_fold(va, shape.n, init_a));
    require_bits(tally::reduce(tally::host, va.begin(), va.begin() + shape.n, init_a, then_apply{}), want_a.back(),
                 "the host backend's ordered fold, " + shape_text(shape));
  }
  owned_stream stream;
  out_value<float> of;
  out_value<double> od;
  out_value<affine> oa;
  // Two views of the floats: squares (a float sum through a transform) and a count (an exact
  // 64-bit sum of a predicate), each against the host backend's answer for the same view.
  std::vector<float> want_squares;
  std::vector<long long> want_counts;
  for (const auto& shape : float_shapes) {
    const auto squares = thrust::make_transform_iterator(vf.begin(), squared_value{});
    want_squares.push_back(tally::reduce(tally::host, squares, squares + shape.n, init_f));
    want_counts.push_back(7 + std::count_if(vf.begin(), vf.begin() + shape.n, [](float x) { return x < 0.5f; }));
  }
  require(want_counts.back() > 7 && want_counts.back() < 7 + static_cast<long long>(float_shapes.back().n),
          "the counted predicate holds for some values, not all");
  out_value<long long> oc;
  const auto run_all = [&](const char* phase) {
    note at(phase);
    single_pass_shapes_match(df, float_shapes, want_f, init_f, stream, of);
    for (std::size_t i = 0; i < float_shapes.size(); ++i) {
      note shape(shape_text(float_shapes[i]) + ", views");
      const auto policy = on(stream).strategy(tally::strategy::single_pass).grid_size(float_shapes[i].grid);
      const auto squares = thrust::make_transform_iterator(df.begin(), squared_value{});
      require_bits(tally::reduce(policy, squares, squares + float_shapes[i].n, init_f), want_squares[i],
                   "reduce of squares");
      const auto counts = thrust::make_transform_iterator(df.begin(), counts_below_half{});
      oc.poison(stream);
      tally::reduce_into(policy, counts, counts + float_shapes[i].n, oc.get(), 7LL, tally::plus<long long>{});
      require(oc.read(stream) == want_counts[i], "reduce_into of a count: " + std::to_string(oc.read(stream)) +
                                                     ", not " + std::to_string(want_counts[i]));
    }
    single_pass_shapes_match(dd, double_shapes, want_d, init_d, stream, od);
    for (std::size_t i = 0; i < affine_shapes.size(); ++i) {
      note shape(shape_text(affine_shapes[i]) + ", ordered operator");
      const auto policy = on(stream).strategy(tally::strategy::single_pass).grid_size(affine_shapes[i].grid);
      require_bits(tally::reduce(policy, da.begin(), da.begin() + affine_shapes[i].n, init_a, then_apply{}), want_a[i],
                   "reduce");
      oa.poison(stream);
      tally::reduce_into(policy, da.begin(), da.begin() + affine_shapes[i].n, oa.get(), init_a, then_apply{});
      require_bits(oa.read(stream), want_a[i], "reduce_into");
    }
  };
  // The largest plans first, at the default wait: the stream's block reaches its final size
  // now, so no growth (a new, zeroed block) resets the fallback count below.
  (void)tally::reduce(on(stream), df.begin(), df.end(), init_f);
  (void)tally::reduce(on(stream), dd.begin(), dd.end(), init_d);
  (void)tally::reduce(on(stream), da.begin(), da.end(), init_a, then_apply{});
  const int device = current_device();
  const unsigned before =
      tally::detail::stream_control_word(device, stream, tally::detail::control_word::fallback_folds);
  const unsigned default_polls = tally::detail::fold_poll_limit();
  {
    fold_poll_guard one_poll(1);
    run_all("a poll limit of 1");
  }
  require(tally::detail::fold_poll_limit() == default_polls, "the poll limit was not restored");
  const unsigned after = tally::detail::stream_control_word(device, stream, tally::detail::control_word::fallback_folds);
  require(after > before, "block 0 never reduced a tile itself with a poll limit of 1 (fallback folds " +
                              std::to_string(before) + " before, " + std::to_string(after) + " after)");
  std::printf("fallback folds with a poll limit of 1: %u\n", after - before);
  run_all("the default poll limit");
}

// ---- resources ----

// The most a stream's block may take for a plan of `tiles` (docs/lifecycle.md: powers of two
// from 16 KiB, the control block and cells of at most 264 bytes).
std::size_t block_bound(std::uint64_t tiles) {
  std::size_t bytes = 16384;
  while (bytes < tally::detail::control_bytes + tiles * 264) bytes *= 2;
  return bytes;
}

void resources_one_block_per_stream() {
  seeded s(3801);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  const auto small = random_values<int>(1000, s.rng);  // one tile: no scratch
  device_buffer<int> di(vi), ds(small);
  const int want = int_sum(vi, n, 1);
  const auto base = tally::scratch_held();
  owned_stream a;
  require_bits(tally::reduce(on(a), ds.begin(), ds.end(), 1), int_sum(small, small.size(), 1), "one-tile reduce");
  require(tally::scratch_held().streams == base.streams, "a one-tile call took a scratch block");
  require_bits(tally::reduce(on(a), di.begin(), di.end(), 1), want, "first multi-tile reduce");
  const auto first = tally::scratch_held();
  require(first.streams == base.streams + 1, "a new stream's first multi-tile call added " +
                                                 std::to_string(first.streams - base.streams) + " blocks, not 1");
  require(first.device_bytes > base.device_bytes, "the new block has no bytes");
  const std::size_t bound = block_bound(tally::detail::make_plan(n, 4).tiles);
  require(first.device_bytes - base.device_bytes <= bound,
          "the block takes " + std::to_string(first.device_bytes - base.device_bytes) + " bytes, more than " +
              std::to_string(bound) + " for its plan");
  out_value<int> out;
  using tally::strategy;
  const strategy strategies[] = {strategy::automatic, strategy::single_pass, strategy::two_pass, strategy::block_atomic,
                                 strategy::warp_atomic};
  for (int c = 0; c < 20; ++c) {
    note at("call " + std::to_string(c));
    const auto policy = on(a).strategy(strategies[c % 5]);
    if (c % 2) {
      out.poison(a);
      tally::reduce_into(policy, di.begin(), di.end(), out.get(), 1, tally::plus<int>{});
      require_bits(out.read(a), want, "reduce_into");
    } else {
      require_bits(tally::reduce(policy, di.begin(), di.end(), 1), want, "reduce");
    }
    const auto now = tally::scratch_held();
    require(now.streams == first.streams, "repeated calls on one stream hold " + std::to_string(now.streams) +
                                              " blocks, not " + std::to_string(first.streams));
    require(now.device_bytes == first.device_bytes, "repeated calls of one plan grew the block");
  }
  owned_stream b;
  require_bits(tally::reduce(on(b), di.begin(), di.end(), 1), want, "a second stream's first call");
  require(tally::scratch_held().streams == first.streams + 1, "a second stream did not get a block of its own");
}

void resources_thread_exit_releases_its_per_thread_block() {
  seeded s(3802);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  device_buffer<int> di(vi);
  const int want = int_sum(vi, n, 0);
  require_bits(tally::reduce(tally::device, di.begin(), di.end(), 0), want, "reduce on the legacy stream");
  const std::size_t entries = tally::detail::scratch_entries();
  const std::size_t bytes = tally::detail::scratch_bytes();
  for (int threads : {1, 4}) {
    note at(std::to_string(threads) + " thread(s)");
    thread_failures failures;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.push_back(checked_thread(failures, "thread " + std::to_string(t), [&] {
        require_bits(tally::reduce(on(cudaStreamPerThread), di.begin(), di.end(), 0), want,
                     "reduce on the per-thread stream");
        require(tally::detail::scratch_entries() > entries, "the per-thread stream's call took no block");
      }));
    }
    for (auto& w : workers) w.join();
    failures.require_none();
    require(tally::detail::scratch_entries() == entries,
            std::to_string(tally::detail::scratch_entries() - entries) + " block(s) of exited threads are still held");
    require(tally::detail::scratch_bytes() == bytes, "the bytes of exited threads' blocks are still held");
  }
}

void resources_bounded_after_80_streams() {
  seeded s(3803);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  device_buffer<int> di(vi);
  const std::size_t limit = tally::detail::max_scratch_entries;
  const std::size_t per_block = block_bound(tally::detail::make_plan(n, 4).tiles);
  const auto check_bound = [&](const std::string& when) {
    const auto held = tally::scratch_held();
    require(held.streams <= limit, std::to_string(held.streams) + " blocks held " + when + ", more than " +
                                       std::to_string(limit));
    require(held.device_bytes <= limit * per_block, std::to_string(held.device_bytes) + " bytes held " + when);
  };
  const int count = 80;
  {
    // All alive at once: the least recently used blocks go, and come back when used again.
    std::vector<std::unique_ptr<owned_stream>> streams;
    for (int i = 0; i < count; ++i) streams.push_back(std::make_unique<owned_stream>());
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < count; ++i) {
        note at("pass " + std::to_string(pass) + ", stream " + std::to_string(i));
        require_bits(tally::reduce(on(*streams[i]), di.begin(), di.end(), i), int_sum(vi, n, i), "reduce");
        check_bound("while 80 streams live");
      }
    }
  }
  check_bound("after destroying 80 streams");
  // One at a time: made, used, destroyed.
  for (int i = 0; i < count; ++i) {
    note at("short-lived stream " + std::to_string(i));
    owned_stream stream;
    require_bits(tally::reduce(on(stream).strategy(tally::strategy::two_pass), di.begin(), di.end(), -i),
                 int_sum(vi, n, -i), "reduce");
  }
  check_bound("after 80 more streams made, used and destroyed one at a time");
  require_no_unlisted_scratch("after 160 streams");
}

void resources_release_scratch_hands_everything_back() {
  seeded s(3804);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  device_buffer<int> di(vi);
  const int want = int_sum(vi, n, 4);
  owned_stream a, b, c;
  const cudaStream_t streams[] = {a, b, c, cudaStreamPerThread, cudaStreamLegacy};
  for (const cudaStream_t stream : streams)
    require_bits(tally::reduce(on(stream), di.begin(), di.end(), 4), want, "reduce before the release");
  const auto held = tally::scratch_held();
  require(held.streams == 5 && held.device_bytes > 0 && held.result_slabs >= 1,
          "scratch_held() before the release: " + std::to_string(held.streams) + " blocks, " +
              std::to_string(held.device_bytes) + " bytes, " + std::to_string(held.result_slabs) + " slabs");

  // A call still running when the release comes: its block is freed only after it (cudaFree
  // waits for the device), so its result stays right.
  out_value<int> out;
  out.poison(a);
  tally_test::keep_stream_busy<><<<1, 1, 0, a>>>(under_sanitizer() ? 100000 : 4000000);
  LIFECYCLE_CUDA(cudaGetLastError());
  tally::reduce_into(on(a), di.begin(), di.end(), out.get(), 4, tally::plus<int>{});
  tally::release_scratch();
  require_bits(out.read(a), want, "a reduce_into in flight during release_scratch()");
  LIFECYCLE_CUDA(cudaDeviceSynchronize());
  tally::release_scratch();
  const auto released = tally::scratch_held();
  require(released.streams == 0 && released.device_bytes == 0 && released.result_slabs == 0,
          "scratch_held() after release_scratch(): " + std::to_string(released.streams) + " blocks, " +
              std::to_string(released.device_bytes) + " bytes, " + std::to_string(released.result_slabs) + " slabs");
  require_no_unlisted_scratch("after release_scratch()");
  for (const cudaStream_t stream : streams)
    require_bits(tally::reduce(on(stream), di.begin(), di.end(), 4), want, "reduce after the release");
  const auto again = tally::scratch_held();
  require(again.streams == 5 && again.result_slabs >= 1, "later calls did not allocate again");
}

// Threads looping calls on their own streams take their blocks from their lease caches,
// without the pool's mutex, while this thread frees blocks under them: release_scratch(),
// eviction past max_scratch_entries (70 short-lived streams a round) and exiting threads'
// per-thread blocks. Every call's value is checked (its init changes every call, so a result
// left over from an earlier call cannot pass); a block freed under a running call would fault
// (the child then fails) or, under compute-sanitizer's memcheck, be reported. Under a
// sanitizer every CUDA call is far slower, so the loops pause between calls: four threads
// calling flat out starved the freeing thread, and the child outran its timeout by minutes
// (it takes about a second without a sanitizer).
void resources_freed_while_threads_loop_on_their_streams() {
  seeded s(3805);
  note seed(s.trace());
  const std::size_t n = big_n();
  const auto vi = random_values<int>(n, s.rng);
  device_buffer<int> di(vi);
  const unsigned base = static_cast<unsigned>(int_sum(vi, n, 0));
  const auto want = [base](int init) { return static_cast<int>(base + static_cast<unsigned>(init)); };
  const int workers_count = 4;
  const int fewest_calls = under_sanitizer() ? 20 : 200;  // each thread's, whenever the rounds end
  const int rounds = under_sanitizer() ? 2 : 6;
  std::atomic<bool> rounds_done{false};
  thread_failures failures;
  std::vector<std::thread> workers;
  start_line start(workers_count + 1);
  for (int t = 0; t < workers_count; ++t) {
    workers.push_back(checked_thread(failures, "looping thread " + std::to_string(t), [&, t] {
      owned_stream stream;
      start.arrive_and_wait();
      // The calls go on until this thread's blocks have been freed under it in every round.
      for (int i = 0; i < fewest_calls || !rounds_done.load(); ++i) {
        const int init = t * 100003 + i;
        if (i % 4 == 3) {
          require_bits(tally::reduce(tally::device.on(stream).strategy(tally::strategy::two_pass), di.begin(),
                                     di.end(), init),
                       want(init), "two-pass call " + std::to_string(i));
        } else {
          require_bits(tally::reduce(on(stream), di.begin(), di.end(), init), want(init), "call " + std::to_string(i));
        }
        if (under_sanitizer()) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
    }));
  }
  // However the rounds end, the loops are told to stop and joined.
  struct stop_and_join {
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~stop_and_join() {
      done.store(true);
      for (auto& thread : threads)
        if (thread.joinable()) thread.join();
    }
  } joiner{rounds_done, workers};
  start.arrive_and_wait();
  for (int round = 0; round < rounds; ++round) {
    note at("freeing round " + std::to_string(round));
    tally::release_scratch();
    {
      std::vector<std::unique_ptr<owned_stream>> churn;
      for (int i = 0; i < 70; ++i) {
        churn.push_back(std::make_unique<owned_stream>());
        require_bits(tally::reduce(on(*churn.back()), di.begin(), di.end(), -i), want(-i), "a short-lived stream's call");
      }
    }
    std::thread passing = checked_thread(failures, "a thread on its per-thread stream", [&] {
      require_bits(tally::reduce(on(cudaStreamPerThread), di.begin(), di.end(), 7), want(7), "per-thread call");
    });
    passing.join();
  }
  rounds_done.store(true);
  for (auto& w : workers) w.join();
  failures.require_none();
  require(tally::scratch_held().streams <= tally::detail::max_scratch_entries,
          std::to_string(tally::scratch_held().streams) + " blocks held after the churn");
  require_no_unlisted_scratch("after the loops");
  tally::release_scratch();
  require(tally::detail::scratch_bytes_allocated() == 0,
          std::to_string(tally::detail::scratch_bytes_allocated()) + " bytes of scratch still allocated after the release");
  require_bits(tally::reduce(tally::device, di.begin(), di.end(), 1), want(1), "a call after the last release");
  require_no_unlisted_scratch("after a call on the legacy stream");
}

// ---- managed memory ----

struct widen_square {
  __host__ __device__ long long operator()(int x) const { return static_cast<long long>(x) * x; }
};

// The host writes the input the moment reduce() returns; on a device without concurrent
// managed access, a kernel still retiring would make that write fault.
void managed_memory_input() {
  seeded s(3901);
  note seed(s.trace());
  const std::size_t n = big_n();
  int* m = nullptr;
  float* mf = nullptr;
  LIFECYCLE_CUDA(cudaMallocManaged(&m, n * sizeof(int)));
  LIFECYCLE_CUDA(cudaMallocManaged(&mf, n * sizeof(float)));
  owned_stream stream;
  const int rounds = under_sanitizer() ? 3 : 20;
  std::vector<int> vi = random_values<int>(n, s.rng);
  std::vector<float> vf = random_values<float>(n, s.rng);
  std::copy(vi.begin(), vi.end(), m);
  std::copy(vf.begin(), vf.end(), mf);
  for (int round = 0; round < rounds; ++round) {
    note at("round " + std::to_string(round));
    const int want_i = int_sum(vi, n, round);
    const float want_f = host_sum(vf, n, 1.0f);
    const int got_i = tally::reduce(tally::device, m, m + n, round);
    vi = random_values<int>(n, s.rng);
    std::copy(vi.begin(), vi.end(), m);  // at once
    require_bits(got_i, want_i, "int reduce over managed memory");
    const float got_f = tally::reduce(on(stream), mf, mf + n, 1.0f);
    vf = random_values<float>(n, s.rng);
    std::copy(vf.begin(), vf.end(), mf);  // at once
    require_bits(got_f, want_f, "float reduce over managed memory on a user stream");
    // A fancy iterator over managed memory: tally cannot see the pointer behind it.
    long long squares = 0;
    for (int x : vi) squares += static_cast<long long>(x) * x;
    const auto squared = thrust::make_transform_iterator(m, widen_square{});
    const long long got_squares = tally::reduce(tally::device, squared, squared + n, 0LL);
    m[0] = vi[0] = 17;  // at once
    require_bits(got_squares, squares, "sum of squares through a transform iterator over managed memory");
  }
  LIFECYCLE_CUDA(cudaDeviceSynchronize());
  LIFECYCLE_CUDA(cudaFree(m));
  LIFECYCLE_CUDA(cudaFree(mf));
}

// ---- a capture in global mode beside first-time calls ----

// Thread A captures in global mode while thread B makes first calls on streams tally has not
// seen (which allocate scratch, a stream to zero it on, and result slabs). B's allocations
// must not invalidate A's capture, and both must be right. B's first call waits behind a busy
// kernel, so that its result takes long enough for tally to ask the driver about the stream,
// and B's reduce_by_key waits for its stream as Thrust's does: a capture in global mode
// forbids such calls on other threads unless they relax their own mode, and a forbidden call
// fails and invalidates the capture. The middle round runs under cudaDeviceScheduleBlockingSync,
// where B's long wait blocks in cudaStreamSynchronize instead of asking cudaStreamQuery.
void capture_in_global_mode_beside_direct_calls_on_other_threads() {
  seeded s(4001);
  note seed(s.trace());
  const std::size_t n = big_n();
  const sum_inputs captured(n, s.rng);
  const auto vb = random_values<int>(n + 101, s.rng);
  device_buffer<int> db(vb);
  // Keys in runs of 7 for B's reduce_by_key, and its expected run sums.
  constexpr std::size_t run_length = 7;
  std::vector<int> keys(vb.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<int>(i / run_length);
  device_buffer<int> dkeys(keys);
  std::vector<int> run_sums((vb.size() + run_length - 1) / run_length, 0);
  for (std::size_t i = 0; i < vb.size(); ++i)
    run_sums[i / run_length] =
        static_cast<int>(static_cast<unsigned>(run_sums[i / run_length]) + static_cast<unsigned>(vb[i]));
  const double patience = child_timeout() * 2 / 3;
  const int rounds = 3;
  const int fresh_per_round = 8;
  unsigned int flags_before = 0;
  LIFECYCLE_CUDA(cudaGetDeviceFlags(&flags_before));
  const unsigned int schedule_before = flags_before & cudaDeviceScheduleMask;
  for (int round = 0; round < rounds; ++round) {
    const bool blocking = round == 1;
    note at("round " + std::to_string(round) + (blocking ? " (blocking-sync schedule)" : ""));
    LIFECYCLE_CUDA(cudaSetDeviceFlags(blocking ? unsigned(cudaDeviceScheduleBlockingSync) : schedule_before));
    // Everything B's own code needs is made before the capture: its only CUDA calls during
    // the capture are tally's.
    std::vector<std::unique_ptr<owned_stream>> fresh;
    for (int i = 0; i < fresh_per_round; ++i) fresh.push_back(std::make_unique<owned_stream>());
    owned_stream capturing;
    out_value<float> out_f;
    out_value<int> out_i;
    const std::vector<int> poison(vb.size(), -7777);
    device_buffer<int> keys_out(poison), sums_out(poison);
    std::ptrdiff_t runs_found = -1;
    // About 50 ms of device time ahead of B's first call, whose result then takes that long.
    tally_test::keep_stream_busy<><<<1, 1, 0, *fresh[0]>>>(100000000);
    LIFECYCLE_CUDA(cudaGetLastError());
    captured_graph graph;
    std::atomic<bool> capturing_now{false}, b_done{false};
    thread_failures failures;
    std::thread a = checked_thread(failures, "the capturing thread", [&] {
      graph.capture(capturing, [&] {
        capturing_now = true;
        captured.reduce_into(capturing, out_f.get(), out_i.get());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(patience);
        while (!b_done) {
          if (std::chrono::steady_clock::now() > deadline) fail("the direct thread never finished");
          std::this_thread::yield();
        }
      });
    });
    std::thread b = checked_thread(failures, "the direct thread", [&] {
      while (!capturing_now) std::this_thread::yield();
      try {
        for (int i = 0; i < fresh_per_round; ++i) {
          note at("fresh stream " + std::to_string(i) + ", " + s.trace());
          require_bits(tally::reduce(on(*fresh[i]), db.begin(), db.end(), i), int_sum(vb, vb.size(), i),
                       "first reduce on a fresh stream");
        }
        require_bits(tally::reduce(on(cudaStreamPerThread), db.begin(), db.end(), -1), int_sum(vb, vb.size(), -1),
                     "first reduce on this thread's per-thread stream");
        const auto ends = tally::reduce_by_key(on(*fresh[1]), dkeys.begin(), dkeys.end(), db.begin(),
                                               keys_out.begin(), sums_out.begin());
        runs_found = ends.first - keys_out.begin();
      } catch (...) {
        b_done = true;
        throw;
      }
      b_done = true;
    });
    a.join();
    b.join();
    failures.require_none();
    require(runs_found == static_cast<std::ptrdiff_t>(run_sums.size()),
            "reduce_by_key beside the capture found " + std::to_string(runs_found) + " runs, not " +
                std::to_string(run_sums.size()));
    std::vector<int> got_keys(run_sums.size()), got_sums(run_sums.size());
    LIFECYCLE_CUDA(cudaMemcpy(got_keys.data(), keys_out.begin(), got_keys.size() * sizeof(int), cudaMemcpyDeviceToHost));
    LIFECYCLE_CUDA(cudaMemcpy(got_sums.data(), sums_out.begin(), got_sums.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (std::size_t r = 0; r < run_sums.size(); ++r) {
      require(got_keys[r] == static_cast<int>(r), "reduce_by_key beside the capture: key of run " + std::to_string(r));
      require_bits(got_sums[r], run_sums[r], "reduce_by_key beside the capture: sum of run " + std::to_string(r));
    }
    for (int replay = 0; replay < 3; ++replay) {
      note at2("replay " + std::to_string(replay));
      out_f.poison(capturing);
      out_i.poison(capturing);
      graph.launch(capturing);
      require_bits(out_f.read(capturing), captured.want_f, "the captured float sum");
      require_bits(out_i.read(capturing), captured.want_i, "the captured int sum");
    }
  }
  LIFECYCLE_CUDA(cudaSetDeviceFlags(schedule_before));
}
#endif  // !TALLY_TEST_HOST_ONLY

using scenario = void (*)();

const std::map<std::string, scenario>& child_scenarios() {
  static const std::map<std::string, scenario> scenarios = {
      {"harness_passes", harness_passes},
      {"harness_fails", harness_fails},
      {"harness_hangs", harness_hangs},
      {"harness_aborts", harness_aborts},
#if !defined(TALLY_TEST_HOST_ONLY)
      {"graph_replay_after_capturing_stream_destroyed", graph_replay_after_capturing_stream_destroyed},
      {"graph_replayed_on_another_stream_while_direct_calls_run_on_the_capturing_stream",
       graph_replayed_on_another_stream_while_direct_calls_run_on_the_capturing_stream},
      {"two_graphs_of_tally_calls_replayed_concurrently", two_graphs_of_tally_calls_replayed_concurrently},
      {"graph_holding_two_tally_calls_in_sequence", graph_holding_two_tally_calls_in_sequence},
      {"graph_reinstantiated_after_its_exec_and_source_stream_are_destroyed",
       graph_reinstantiated_after_its_exec_and_source_stream_are_destroyed},
      {"synchronous_calls_refused_inside_a_capture", synchronous_calls_refused_inside_a_capture},
      {"per_thread_default_stream", per_thread_default_stream},
      {"legacy_and_per_thread_streams_named_explicitly_from_many_threads",
       legacy_and_per_thread_streams_named_explicitly_from_many_threads},
      {"stream_handles_reused_after_destroy", stream_handles_reused_after_destroy},
      {"one_stream_many_threads_every_strategy", one_stream_many_threads_every_strategy},
      {"one_legacy_stream_many_threads_every_strategy", one_legacy_stream_many_threads_every_strategy},
      {"device_reset_then_calls_work", device_reset_then_calls_work},
      {"device_reset_between_calls_in_a_loop", device_reset_between_calls_in_a_loop},
      {"error_left_pending_by_the_application", error_left_pending_by_the_application},
      {"a_real_cuda_error_message", a_real_cuda_error_message},
      {"sticky_error_makes_calls_throw_it", sticky_error_makes_calls_throw_it},
      {"trapping_functor_in_transform_reduce", trapping_functor_in_transform_reduce},
      {"trapping_functor_in_reduce", trapping_functor_in_reduce},
      {"huge_counting_range", huge_counting_range},
      {"forward_progress_fallback_fold", forward_progress_fallback_fold},
      {"resources_one_block_per_stream", resources_one_block_per_stream},
      {"resources_thread_exit_releases_its_per_thread_block", resources_thread_exit_releases_its_per_thread_block},
      {"resources_bounded_after_80_streams", resources_bounded_after_80_streams},
      {"resources_release_scratch_hands_everything_back", resources_release_scratch_hands_everything_back},
      {"resources_freed_while_threads_loop_on_their_streams", resources_freed_while_threads_loop_on_their_streams},
      {"managed_memory_input", managed_memory_input},
      {"two_devices_threads_graphs_and_a_device_reset", two_devices_threads_graphs_and_a_device_reset},
      {"capture_in_global_mode_beside_direct_calls_on_other_threads",
       capture_in_global_mode_beside_direct_calls_on_other_threads},
#endif
  };
  return scenarios;
}

int run_child_scenario(const std::string& name) {
  const auto found = child_scenarios().find(name);
  if (found == child_scenarios().end()) {
    std::fprintf(stderr, "test_lifecycle: unknown child scenario '%s'\n", name.c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    found->second();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %s FAILED: %s\n", name.c_str(), e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "child %s FAILED: threw something that is not a std::exception\n", name.c_str());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("child %s passed in %.2f s\n", name.c_str(), seconds);
  return 0;
}

// ---- the tests ---------------------------------------------------------------------------

TEST(child_harness, reports_output_exit_status_signal_and_timeout) {
  const auto ok = run_child("harness_passes", 20);
  EXPECT_TRUE(passed(ok)) << describe("harness_passes", ok);
  EXPECT_TRUE(contains(ok.output, "harness output on stdout")) << describe("harness_passes", ok);

  const auto failed = run_child("harness_fails", 20);
  EXPECT_TRUE(failed.exited && failed.exit_code == 1 && !failed.timed_out) << describe("harness_fails", failed);
  EXPECT_TRUE(contains(failed.output, "harness output on stderr")) << describe("harness_fails", failed);
  EXPECT_TRUE(contains(failed.output, "FAILED: deliberate failure")) << describe("harness_fails", failed);

  const auto aborted = run_child("harness_aborts", 20);
  EXPECT_TRUE(aborted.signaled && aborted.signal == SIGABRT && !aborted.timed_out) << describe("harness_aborts", aborted);
  EXPECT_FALSE(passed(aborted));

  const auto hung = run_child("harness_hangs", 1);
  EXPECT_TRUE(hung.timed_out && hung.signaled && hung.signal == SIGKILL) << describe("harness_hangs", hung);
  EXPECT_LT(hung.seconds, 10.0);
  EXPECT_FALSE(passed(hung));

  const auto unknown = run_child("no_such_scenario", 20);
  EXPECT_TRUE(unknown.exited && unknown.exit_code == 2) << describe("no_such_scenario", unknown);
}

#if !defined(TALLY_TEST_HOST_ONLY)
class lifecycle : public tally_test::device_test {
 protected:
  static void expect_child_passes(const char* name) {
    const auto result = run_child(name, child_timeout());
    EXPECT_TRUE(passed(result)) << describe(name, result);
  }
};

#define LIFECYCLE_CHILD_TEST(name) \
  TEST_F(lifecycle, name) { expect_child_passes(#name); }

LIFECYCLE_CHILD_TEST(graph_replay_after_capturing_stream_destroyed)
LIFECYCLE_CHILD_TEST(graph_replayed_on_another_stream_while_direct_calls_run_on_the_capturing_stream)
LIFECYCLE_CHILD_TEST(two_graphs_of_tally_calls_replayed_concurrently)
LIFECYCLE_CHILD_TEST(graph_holding_two_tally_calls_in_sequence)
LIFECYCLE_CHILD_TEST(graph_reinstantiated_after_its_exec_and_source_stream_are_destroyed)
LIFECYCLE_CHILD_TEST(synchronous_calls_refused_inside_a_capture)
LIFECYCLE_CHILD_TEST(per_thread_default_stream)
LIFECYCLE_CHILD_TEST(legacy_and_per_thread_streams_named_explicitly_from_many_threads)
LIFECYCLE_CHILD_TEST(stream_handles_reused_after_destroy)
LIFECYCLE_CHILD_TEST(one_stream_many_threads_every_strategy)
LIFECYCLE_CHILD_TEST(one_legacy_stream_many_threads_every_strategy)
LIFECYCLE_CHILD_TEST(device_reset_then_calls_work)
LIFECYCLE_CHILD_TEST(device_reset_between_calls_in_a_loop)
LIFECYCLE_CHILD_TEST(error_left_pending_by_the_application)
LIFECYCLE_CHILD_TEST(a_real_cuda_error_message)
LIFECYCLE_CHILD_TEST(sticky_error_makes_calls_throw_it)
LIFECYCLE_CHILD_TEST(trapping_functor_in_transform_reduce)
LIFECYCLE_CHILD_TEST(trapping_functor_in_reduce)
LIFECYCLE_CHILD_TEST(forward_progress_fallback_fold)
LIFECYCLE_CHILD_TEST(resources_one_block_per_stream)
LIFECYCLE_CHILD_TEST(resources_thread_exit_releases_its_per_thread_block)
LIFECYCLE_CHILD_TEST(resources_bounded_after_80_streams)
LIFECYCLE_CHILD_TEST(resources_release_scratch_hands_everything_back)
LIFECYCLE_CHILD_TEST(resources_freed_while_threads_loop_on_their_streams)
LIFECYCLE_CHILD_TEST(managed_memory_input)
LIFECYCLE_CHILD_TEST(capture_in_global_mode_beside_direct_calls_on_other_threads)

// Needs two GPUs: skipped where there is one (scripts/gpu-check runs it on a two-GPU machine).
class lifecycle_two_devices : public tally_test::two_device_test {};
TEST_F(lifecycle_two_devices, threads_graphs_and_a_device_reset) {
  const auto result = run_child("two_devices_threads_graphs_and_a_device_reset", child_timeout());
  EXPECT_TRUE(passed(result)) << describe("two_devices_threads_graphs_and_a_device_reset", result);
}

// 2^62 counted values cannot be summed in seconds: a child that finishes that soon must have
// refused the range or printed the exact sum, and one still running is killed.
TEST_F(lifecycle, huge_counting_range_is_never_a_fast_wrong_answer) {
  const auto result = run_child("huge_counting_range", 5);
  if (result.timed_out) return;  // summing for real
  ASSERT_TRUE(passed(result)) << describe("huge_counting_range", result);
  const unsigned long long n = 1ull << 62;
  const auto at = result.output.find("sum ");
  if (at == std::string::npos) {
    EXPECT_TRUE(contains(result.output, "refused with std::invalid_argument: tally::reduce"))
        << describe("huge_counting_range", result);
    return;
  }
  EXPECT_EQ(std::strtoull(result.output.c_str() + at + 4, nullptr, 10), triangular(n))
      << "a fast wrong answer; " << describe("huge_counting_range", result);
}

// Ranges past 2^32 elements, where 32-bit arithmetic in a plan would wrap, against exact sums
// modulo 2^64.
TEST_F(lifecycle, counting_range_beyond_32_bits_sums_exactly) {
  const unsigned long long n = tally_test::under_sanitizer() ? (1ull << 24) + 12345 : (1ull << 33) + 12345;
  SCOPED_TRACE("n = " + std::to_string(n));
  const thrust::counting_iterator<unsigned long long> zero(0);
  EXPECT_EQ(tally::reduce(tally::device, zero, zero + n), triangular(n));
  const unsigned long long start = (1ull << 40) + 7;
  const thrust::counting_iterator<unsigned long long> shifted(start);
  EXPECT_EQ(tally::reduce(tally::device, shifted, shifted + n), n * start + triangular(n));
  const auto mapped = thrust::make_transform_iterator(zero, three_x_plus_one{});
  EXPECT_EQ(tally::reduce(tally::device, mapped, mapped + n, 0ull), 3 * triangular(n) + n);
  tally_test::device_value<unsigned long long> out;
  tally::reduce_into(tally::device.strategy(tally::strategy::two_pass), zero, zero + n, out.get(), 11ull,
                     tally::plus<unsigned long long>{});
  TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(out.read(), triangular(n) + 11);
}

// A kernel that waits for the host to set *release, or gives up after max_ns and says so in
// *gave_up: it stands for an application's kernel that waits for its host.
__global__ void wait_for_host(const volatile unsigned* release, unsigned long long max_ns, unsigned* gave_up) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*release != 0) return;
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > max_ns) {
      *gave_up = 1;
      return;
    }
  }
}

// docs/lifecycle.md, "Resources": once a stream's block and the context's result slots exist,
// a call allocates nothing and waits for no other stream, so reduce returns its value, and
// reduce_into and its two pass run, while a kernel on another stream waits for the host. (A
// call that made a block would wait until that kernel gave up, and the test would see it.)
TEST_F(lifecycle, steady_state_calls_run_while_another_streams_kernel_waits_for_the_host) {
  const std::size_t n = (std::size_t(1) << 20) + 77;  // more than two tiles: the calls take scratch
  seeded s(4301);
  SCOPED_TRACE(s.trace());
  const auto v = random_values<int>(n, s.rng);
  const int want = reference_sum<int>(v, 0, n, 5);
  device_buffer<int> d(v);
  tally_test::device_value<int> out;
  owned_stream held, own;
  const auto policy = tally::device.on(own);
  // The first calls make the stream's block and the context's result slots.
  ASSERT_EQ(tally::reduce(policy, d.begin(), d.end(), 5), want);
  tally::reduce_into(policy.strategy(tally::strategy::two_pass), d.begin(), d.end(), out.get(), 5, tally::plus<int>{});
  TEST_CUDA(cudaStreamSynchronize(own));
  unsigned* flags = nullptr;  // [0] release, [1] gave up; mapped, made before the wait starts
  TEST_CUDA(cudaHostAlloc(&flags, 2 * sizeof(unsigned), cudaHostAllocMapped));
  flags[0] = 0;
  flags[1] = 0;
  unsigned* device_flags = nullptr;
  TEST_CUDA(cudaHostGetDevicePointer(&device_flags, flags, 0));
  // compute-sanitizer runs one kernel at a time, so there the calls run without the wait.
  const bool wait = !under_sanitizer();
  const unsigned long long wait_ns = 20'000'000'000ull;  // far beyond the calls below
  if (wait) wait_for_host<<<1, 1, 0, held>>>(device_flags, wait_ns, device_flags + 1);
  TEST_CUDA(cudaGetLastError());

  const int got = tally::reduce(policy, d.begin(), d.end(), 5);
  tally::reduce_into(policy.strategy(tally::strategy::two_pass), d.begin(), d.end(), out.get(), 5, tally::plus<int>{});
  TEST_CUDA(cudaStreamSynchronize(own));
  const unsigned gave_up_before_release = *static_cast<volatile unsigned*>(flags + 1);
  *static_cast<volatile unsigned*>(flags) = 1;
  TEST_CUDA(cudaStreamSynchronize(held));
  TEST_CUDA(cudaFreeHost(flags));
  EXPECT_EQ(gave_up_before_release, 0u) << "a steady-state call waited for the other stream's kernel";
  EXPECT_EQ(got, want);
  EXPECT_EQ(out.read(), want);
}

#endif  // !TALLY_TEST_HOST_ONLY

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child") return run_child_scenario(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
