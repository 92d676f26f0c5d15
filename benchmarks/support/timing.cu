#include "support/timing.cuh"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace bench {

void cuda_fail(cudaError_t code, const char* call, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(code),
               cudaGetErrorString(code));
  std::abort();
}

namespace {

// Spins until the host raises release[0], or until timeout_ns have passed on the GPU's
// global timer, in which case it raises timed_out[0] and ends (so a host that blocks
// while enqueuing cannot deadlock against it).
__global__ void hold_stream_kernel(const volatile unsigned int* release, volatile unsigned int* timed_out,
                                   unsigned long long timeout_ns) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (release[0] == 0u) {
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      timed_out[0] = 1u;
      return;
    }
  }
}

}  // namespace

event_timer::event_timer(pacing pace) : pace_(pace) {
  BENCH_CUDA_CHECK(cudaEventCreate(&start_));
  BENCH_CUDA_CHECK(cudaEventCreate(&stop_));
  void* flags = nullptr;
  BENCH_CUDA_CHECK(cudaHostAlloc(&flags, 2 * sizeof(unsigned int), cudaHostAllocMapped));
  flags_ = static_cast<unsigned int*>(flags);
}

event_timer::~event_timer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaFreeHost(flags_);
}

void event_timer::hold(cudaStream_t stream) {
  volatile unsigned int* flags = flags_;
  flags[0] = 0u;
  flags[1] = 0u;
  unsigned int* device_flags = nullptr;
  BENCH_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags), flags_, 0));
  hold_stream_kernel<<<1, 1, 0, stream>>>(device_flags, device_flags + 1,
                                          static_cast<unsigned long long>(hold_timeout_ms) * 1000000ull);
  BENCH_CUDA_CHECK(cudaGetLastError());
}

void event_timer::release() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  static_cast<volatile unsigned int*>(flags_)[0] = 1u;
}

void event_timer::check_hold_kept(int k) const {
  if (static_cast<volatile unsigned int*>(flags_)[1] != 0u) {
    std::fprintf(stderr,
                 "event_timer: the stream's hold ran out (%u ms) before %d calls were enqueued; the host's time "
                 "would be in the figure (does an enqueue synchronize?)\n",
                 hold_timeout_ms, k);
    std::abort();
  }
}

void fill_random(float* device_data, std::size_t n, std::uint64_t seed) {
  std::vector<float> host(n);
  std::mt19937_64 rng(seed);
  constexpr float scale = 1.0f / 16777216.0f;  // 2^-24: 24 random bits -> [0, 1)
  std::size_t i = 0;
  for (; i + 1 < n; i += 2) {  // two 24-bit values from each 64-bit draw
    const std::uint64_t bits = rng();
    host[i] = static_cast<float>(bits >> 40) * scale;
    host[i + 1] = static_cast<float>((bits >> 16) & 0xFFFFFFu) * scale;
  }
  if (i < n) host[i] = static_cast<float>(rng() >> 40) * scale;
  BENCH_CUDA_CHECK(cudaMemcpy(device_data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}

void fill_random(double* device_data, std::size_t n, std::uint64_t seed) {
  std::vector<double> host(n);
  std::mt19937_64 rng(seed);
  constexpr double scale = 1.0 / 9007199254740992.0;  // 2^-53: 53 random bits -> [0, 1)
  for (double& v : host) v = static_cast<double>(rng() >> 11) * scale;
  BENCH_CUDA_CHECK(cudaMemcpy(device_data, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
}

void fill_random(int* device_data, std::size_t n, std::uint64_t seed) {
  std::vector<int> host(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  while (i < n) {  // 21 values in [0, 8) from the top 63 bits of each 64-bit draw
    std::uint64_t bits = rng() >> 1;
    for (int k = 0; k < 21 && i < n; ++k, ++i, bits >>= 3) host[i] = static_cast<int>(bits & 7u);
  }
  BENCH_CUDA_CHECK(cudaMemcpy(device_data, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
}

std::size_t l2_cache_bytes() {
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  int l2 = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  return static_cast<std::size_t>(l2);
}

int rotation_copies(std::size_t bytes, std::size_t l2_bytes) {
  if (bytes == 0) return 1;
  const std::size_t wanted = (2 * l2_bytes + bytes - 1) / bytes;
  return static_cast<int>(std::clamp<std::size_t>(wanted, 1, 8));
}

template <class T>
basic_rotating_input<T>::basic_rotating_input(std::size_t n, std::uint64_t seed) : n_(n) {
  const int copies = rotation_copies(bytes(), l2_cache_bytes());
  buffers_.assign(static_cast<std::size_t>(copies), nullptr);
  for (T*& b : buffers_) BENCH_CUDA_CHECK(cudaMalloc(&b, std::max<std::size_t>(bytes(), 1)));
  fill_random(buffers_.front(), n_, seed);
  for (std::size_t c = 1; c < buffers_.size(); ++c)
    BENCH_CUDA_CHECK(cudaMemcpy(buffers_[c], buffers_.front(), bytes(), cudaMemcpyDeviceToDevice));
}

template <class T>
basic_rotating_input<T>::~basic_rotating_input() {
  for (T* b : buffers_) cudaFree(b);
}

template class basic_rotating_input<float>;
template class basic_rotating_input<double>;
template class basic_rotating_input<int>;

namespace {

__global__ void __launch_bounds__(read_ceiling::block)
    read_ceiling_kernel(const float* __restrict__ in, std::size_t n, float* __restrict__ out, float magic) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* in4 = reinterpret_cast<const float4*>(in);  // cudaMalloc: 256-byte aligned
  const std::size_t n4 = n / 4;

  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  std::size_t i = tid;
  for (; i + 3 * stride < n4; i += 4 * stride) {  // four 16-byte loads in flight
    const float4 a = in4[i];
    const float4 b = in4[i + stride];
    const float4 c = in4[i + 2 * stride];
    const float4 d = in4[i + 3 * stride];
    s0 += (a.x + a.y) + (a.z + a.w);
    s1 += (b.x + b.y) + (b.z + b.w);
    s2 += (c.x + c.y) + (c.z + c.w);
    s3 += (d.x + d.y) + (d.z + d.w);
  }
  for (; i < n4; i += stride) {
    const float4 a = in4[i];
    s0 += (a.x + a.y) + (a.z + a.w);
  }
  for (std::size_t j = 4 * n4 + tid; j < n; j += stride) s1 += in[j];

  const float sum = (s0 + s1) + (s2 + s3);
  if (sum == magic) *out = sum;  // never true for our inputs; keeps every load alive
}

}  // namespace

read_ceiling::read_ceiling() {
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  int sms = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int per_sm = 0;
  BENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_ceiling_kernel, block, 0));
  grid_ = std::max(1, sms * per_sm);
}

void read_ceiling::operator()(const float* in, std::size_t n, float* out, cudaStream_t stream) const {
  // Float inputs are in [0, 1) and int inputs (read as floats: tiny subnormals) are small and
  // non-negative: their sum is never negative, so the magic value never matches. Doubles read
  // as floats are arbitrary bits; a match there would only write one float to *out.
  read_ceiling_kernel<<<grid_, block, 0, stream>>>(in, n, out, -1.0f);
  BENCH_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bench
