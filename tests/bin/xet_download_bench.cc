// Xet download benchmark (a program that prints numbers, not a test): a file of --size-mib MiB stored as
// Xet in the loopback test hub, fetched by `fetchd pull`, by curl fetching the same xorb byte ranges raw
// (the transfer alone: no decoding, hashing or writing), and by the @huggingface/hub npm client.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "fetchd/transfer/http_client.h"
#include "fetchd/xet/reconstruction.h"
#include "tests/hub/test_hub.h"
#include "tests/support/temp_dir.h"

namespace {

struct RunCost {
  double wall_s = 0;
  double cpu_s = 0;  // user + system of the child and its children
  int status = -1;
  std::string out;
};

// Runs argv with extra environment, stdout to a file; returns wall time and the child's CPU time.
RunCost run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::filesystem::path& out_file) {
  std::fflush(stdout);  // the child must not inherit (and print again) what is still buffered
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    if (std::freopen(out_file.c_str(), "w", stdout) == nullptr) ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  RunCost cost;
  cost.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cost.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  cost.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(out_file);
  std::getline(in, cost.out, '\0');
  return cost;
}

// A safetensors file of one bf16 tensor, `size` bytes of data.
std::string make_checkpoint(std::size_t size) {
  // bf16-like weights: a random low byte and a high byte (sign and exponent) from a few values, so byte
  // grouping plus LZ4 finds what it finds in real checkpoints.
  std::string header = R"({"w":{"dtype":"BF16","shape":[)" + std::to_string(size / 2) + R"(],"data_offsets":[0,)" +
                       std::to_string(size) + "]}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string data(8 + header.size() + size, '\0');
  const std::uint64_t header_length = header.size();
  std::memcpy(data.data(), &header_length, 8);
  std::memcpy(data.data() + 8, header.data(), header.size());
  const std::size_t base = 8 + header.size();
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  static constexpr unsigned char kHigh[] = {0x3c, 0x3d, 0xbc, 0xbd, 0x3b, 0xbb, 0x3e, 0xbe};
  for (std::size_t i = base; i + 2 <= data.size(); i += 2) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    data[i] = static_cast<char>(x & 0xff);
    data[i + 1] = static_cast<char>(kHigh[(x >> 8) % 8]);
  }
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t size_mib = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--size-mib") size_mib = std::stoul(argv[i + 1]);
  }
  const std::size_t size = size_mib << 20;
  std::cout << "Xet download over loopback, " << size_mib << " MiB file, " << ::sysconf(_SC_NPROCESSORS_ONLN)
            << " CPUs\n";

  testing_support::TestHub hub;
  hub.set_store_lfs_as_xet(true);
  auto start = std::chrono::steady_clock::now();
  hub.commit("bench/xet", "main", {{"config.json", "{}", false}, {"model.safetensors", make_checkpoint(size), true}});
  std::cout << "test hub: chunked, compressed and stored in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n\n";
  const double gb = static_cast<double>(size) / 1e9;
  std::printf("%-28s %8s %9s %12s\n", "client", "wall s", "MB/s", "CPU s/GB");
  const auto row = [&](const char* name, const RunCost& c, double bytes) {
    std::printf("%-28s %8.2f %9.1f %12.2f%s\n", name, c.wall_s, bytes / 1e6 / c.wall_s, c.cpu_s / gb,
                c.status == 0 ? "" : "  (FAILED)");
  };

  // fetchd pull, into a fresh cache.
  testing_support::TempDir home;
  const auto fetchd = run({FETCHD_BINARY, "pull", "--model", "bench/xet", "--verbose"},
                          {{"HF_HOME", home.path().string()}, {"HF_ENDPOINT", hub.endpoint()}}, home / "fetchd.out");
  row("fetchd pull (Xet)", fetchd, static_cast<double>(size));
  if (fetchd.status != 0) std::printf("  fetchd: %s\n", fetchd.out.c_str());

  // curl: the same xorb byte ranges, raw, 8 transfers at once, to /dev/null.
  fetchd::transfer::HttpClient http;
  fetchd::transfer::HttpRequest token_request;
  token_request.url = hub.endpoint() + "/api/models/bench/xet/xet-read-token/main";
  const auto token = http.perform(token_request);
  const auto body = token.response.body;
  const auto field = [&](const std::string& key) {
    const auto at = body.find("\"" + key + "\":\"") + key.size() + 4;
    return body.substr(at, body.find('"', at) - at);
  };
  fetchd::transfer::HttpRequest recon_request;
  recon_request.url =
      field("casUrl") + "/v2/reconstructions/" + *hub.xet_hash("bench/xet", "main", "model.safetensors");
  recon_request.headers = {"Authorization: Bearer " + field("accessToken")};
  const auto recon = fetchd::xet::parse_reconstruction(http.perform(recon_request, nullptr, 256u << 20).response.body);
  std::ofstream config(home / "curl.cfg");
  double wire = 0;
  for (const auto& [xorb, sources] : recon.sources) {
    for (const auto& source : sources) {
      std::vector<fetchd::xet::ByteRange> ranges;
      for (const auto& r : source.ranges) {
        ranges.push_back(r.bytes);
        wire += static_cast<double>(r.bytes.length());
      }
      config << "url = \"" << source.url << "\"\nrange = \"" << fetchd::xet::range_header_value(ranges).substr(6)
             << "\"\noutput = \"/dev/null\"\n";
    }
  }
  config.close();
  const auto curl = run({"/usr/bin/curl", "--silent", "--no-progress-meter", "--parallel", "--parallel-max", "8", "-K",
                         (home / "curl.cfg").string()},
                        {}, home / "curl.out");
  row("curl, xorb ranges raw", curl, wire);
  std::printf("  (curl moved %.1f MB of compressed xorb bytes for the %.1f MB file)\n", wire / 1e6,
              static_cast<double>(size) / 1e6);

  const auto npm = run({NODE_EXECUTABLE, NPM_SCRIPT, hub.endpoint(), "bench/xet", "model.safetensors"},
                       {{"NODE_PATH", TEST_NODE_MODULES}}, home / "npm.out");
  row("@huggingface/hub (node)", npm, static_cast<double>(size));
  return fetchd.status == 0 && curl.status == 0 && npm.status == 0 ? 0 : 1;
}
