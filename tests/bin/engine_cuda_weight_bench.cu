// engine-cuda-weight-bench: weight_gemv per weight type on a 4096x4096 and a 16384x4096 weight (and the
// 151936x1024 BF16 vocabulary projection of Qwen3) at 1 and 8 tokens, as GB/s of weight bytes read beside
// the device-to-device copy bandwidth measured in the same run; then dequantize_to_bf16 the same way. Each
// timing is the median of 50 launches (CUDA events, queued behind a spinning kernel so that host launch
// costs stay out) after warm-up, rotating among enough copies of the weight that together they exceed L2
// four times over. Usage: engine-cuda-weight-bench [--quick]

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/weight_kernels.h"
#include "engine/quant/quant.h"

namespace {

using engine::quant::WeightType;

// Pseudo-random bytes (splitmix64 of the index): the kernels' speed does not depend on the values, and
// filling on the device keeps gigabytes of weights off the host.
__global__ void fill_random(std::uint64_t* p, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = z ^ (z >> 31);
  }
}

// Small normal-ish floats for x (random bits would be NaN or huge and slow nothing down, but read oddly).
__global__ void fill_floats(float* p, std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = static_cast<float>(static_cast<int>(i * 2654435761u % 2001u) - 1000) * 1e-3f;
  }
}

void* device_random(std::size_t bytes, std::uint64_t seed) {
  void* p = nullptr;
  const std::size_t words = (bytes + 7) / 8;
  CUDA_CHECK(cudaMalloc(&p, words * 8));
  fill_random<<<1024, 256>>>(static_cast<std::uint64_t*>(p), words, seed);
  CUDA_CHECK_LAUNCH();
  return p;
}

// Keeps the GPU busy for `ns` nanoseconds, so that the launches queued behind it start back to back.
__global__ void spin(long long ns) {
  long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (long long now = start; now - start < ns;) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}

// Median time in seconds of `repeats` runs of f(i), each timed with its own pair of events, after warm-up.
// The runs queue up behind a spinning kernel: the events then time the GPU's work, not the host's launches
// (a 4096x4096 gemv takes less time than its launch on the host).
double median_seconds(int repeats, const std::function<void(int)>& f) {
  for (int i = 0; i < 3; ++i) f(i);
  std::vector<cudaEvent_t> events(2 * static_cast<std::size_t>(repeats));
  for (auto& e : events) CUDA_CHECK(cudaEventCreate(&e));
  spin<<<1, 1>>>(50'000'000);
  CUDA_CHECK_LAUNCH();
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(events[2 * static_cast<std::size_t>(i)]));
    f(i);
    CUDA_CHECK(cudaEventRecord(events[2 * static_cast<std::size_t>(i) + 1]));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * static_cast<std::size_t>(i)],
                                    events[2 * static_cast<std::size_t>(i) + 1]));
    times.push_back(ms * 1e-3);
  }
  for (auto& e : events) CUDA_CHECK(cudaEventDestroy(e));
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[static_cast<std::size_t>(repeats / 2)];
}

struct Shape {
  WeightType type;
  std::size_t rows, cols;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "engine-cuda-weight-bench: no GPU to measure (%s)\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "CUDA reports no devices");
    return 1;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int repeats = quick ? 10 : 50;
  // Working sets of at least four times L2, so that every launch streams its weight from memory.
  const std::size_t min_working_set = 4 * static_cast<std::size_t>(prop.l2CacheSize);

  // Device-to-device copy: bytes read plus bytes written per second, the ceiling the kernels are held to.
  const std::size_t copy_bytes = std::size_t{1} << 30;
  void* copy_src = device_random(copy_bytes, 1);
  void* copy_dst = device_random(copy_bytes, 2);
  const double copy_s = median_seconds(quick ? 5 : 20, [&](int) {
    CUDA_CHECK(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice));
  });
  const double copy_gbs = 2.0 * static_cast<double>(copy_bytes) / copy_s * 1e-9;
  CUDA_CHECK(cudaFree(copy_src));
  CUDA_CHECK(cudaFree(copy_dst));
  std::printf("%s: %d SMs, L2 %.0f MB; device-to-device copy %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize / 1e6, copy_gbs);
  std::printf("%-5s %13s %6s %9s %8s %8s\n", "type", "shape", "tokens", "us", "GB/s", "of copy");

  std::vector<Shape> shapes;
  for (const WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0,
                                WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    shapes.push_back({type, 4096, 4096});
    shapes.push_back({type, 16384, 4096});  // big enough that launch and tail effects fade
  }
  shapes.push_back({WeightType::BF16, 151936, 1024});

  float* x = nullptr;
  float* y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, engine::cuda::kGemvMaxTokens * 4096 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, engine::cuda::kGemvMaxTokens * 151936 * sizeof(float)));
  fill_floats<<<64, 256>>>(x, engine::cuda::kGemvMaxTokens * 4096);
  CUDA_CHECK_LAUNCH();
  __nv_bfloat16* bf16_out = nullptr;
  CUDA_CHECK(cudaMalloc(&bf16_out, std::size_t{4096} * 4096 * sizeof(__nv_bfloat16)));

  struct DequantResult {
    WeightType type;
    double seconds, bytes;
  };
  std::vector<DequantResult> dequant;
  for (const Shape& s : shapes) {
    const std::size_t bytes = s.rows * *engine::quant::row_bytes(s.type, s.cols);
    const std::size_t copies = std::max<std::size_t>(2, (min_working_set + bytes - 1) / bytes);
    std::vector<void*> weights;
    for (std::size_t i = 0; i < copies; ++i) weights.push_back(device_random(bytes, 100 + i));
    const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    for (const std::size_t tokens : {std::size_t{1}, std::size_t{8}}) {
      const double t = median_seconds(repeats, [&](int i) {
        engine::cuda::weight_gemv(s.type, weights[static_cast<std::size_t>(i) % copies], s.rows, s.cols, x, tokens,
                                  nullptr, y, s.rows, nullptr);
      });
      const double gbs = static_cast<double>(bytes) / t * 1e-9;
      std::printf("%-5s %13s %6zu %9.2f %8.0f %7.0f%%\n", std::string(engine::quant::weight_type_name(s.type)).c_str(),
                  shape.c_str(), tokens, t * 1e6, gbs, 100.0 * gbs / copy_gbs);
    }
    if (s.rows == 4096) {
      const double t = median_seconds(repeats, [&](int i) {
        engine::cuda::dequantize_to_bf16(s.type, weights[static_cast<std::size_t>(i) % copies], 0, s.rows, s.cols,
                                         bf16_out, nullptr);
      });
      dequant.push_back({s.type, t, static_cast<double>(bytes + s.rows * s.cols * 2)});
    }
    for (void* w : weights) CUDA_CHECK(cudaFree(w));
  }
  std::printf("\ndequantize_to_bf16, 4096x4096 (GB/s of bytes read + bf16 written)\n");
  for (const auto& d : dequant) {
    const double gbs = d.bytes / d.seconds * 1e-9;
    std::printf("%-5s %9.2f us %8.0f GB/s %7.0f%% of copy\n",
                std::string(engine::quant::weight_type_name(d.type)).c_str(), d.seconds * 1e6, gbs,
                100.0 * gbs / copy_gbs);
  }
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  CUDA_CHECK(cudaFree(bf16_out));
  return 0;
}
