// The fetchd binary as an init container and a sidecar run it: `fetchd pull` and `fetchd serve`.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include "engine/format/safetensors_writer.h"
#include "fetch/v1/fetch.grpc.pb.h"
#include "fetchd/proof/content_hash.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/hub/test_hub.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_support::ChildProcess;

std::string weights_bytes() {
  engine::format::SafetensorsWriter w;
  std::vector<std::byte> data(400000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 31 % 251);
  w.add("w", engine::format::SafetensorsDType::F32, {100000}, data);
  const auto bytes = w.serialize();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string last_line(const std::string& text) {
  auto trimmed = text;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  return trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
}

class FetchdBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_.commit("org/model", "main",
                {{"config.json", "{}", false}, {"tokenizer.json", "{}", false}, {"model.safetensors", weights_, true}});
    env_ = {{"HF_HOME", home_.path().string()},
            {"HF_ENDPOINT", hub_.endpoint()},
            {"HF_HUB_CACHE", ""},
            {"HF_TOKEN", ""},
            {"HF_HUB_OFFLINE", ""},
            {"HF_HUB_DOWNLOAD_TIMEOUT", "2"}};
  }

  int pull(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    args.insert(args.begin(), {FETCHD_BINARY, "pull"});
    ChildProcess child(args, env_);
    const int status = child.wait();
    if (out) *out = child.out();
    if (err) *err = child.err();
    return status;
  }

  fs::path partial() const {
    return home_.path() / "hub" / "models--org--model" / "blobs" /
           (fetchd::proof::sha256_hex(std::as_bytes(std::span(weights_.data(), weights_.size()))) + ".incomplete");
  }

  std::string weights_ = weights_bytes();
  testing_support::TestHub hub_;
  testing_support::TempDir home_;
  std::map<std::string, std::string> env_;
};

TEST_F(FetchdBinary, PullPrintsThePathToServeLast) {
  std::string out, err;
  ASSERT_EQ(pull({"--model", "org/model"}, &out, &err), 0) << err;
  const fs::path path = last_line(out);
  EXPECT_TRUE(fs::exists(path / "model.safetensors")) << out;
  EXPECT_THAT(err, HasSubstr("fetched and proven"));
  // The second run is served from the cache.
  ASSERT_EQ(pull({"--model", "org/model"}, &out, &err), 0) << err;
  EXPECT_EQ(last_line(out), path.string());
  EXPECT_THAT(err, HasSubstr("already in the cache"));
}

TEST_F(FetchdBinary, VerboseSaysHowEachFileWasProven) {
  std::string out, err;
  ASSERT_EQ(pull({"--model", "org/model", "--verbose"}, &out, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("model.safetensors  " + std::to_string(weights_.size()) +
                             " bytes  proven by sha256+safetensors-layout  -> blobs/"));
  EXPECT_THAT(err, HasSubstr("config.json  2 bytes  proven by git-sha1"));
}

TEST_F(FetchdBinary, ExitCodesTellFailuresApart) {
  std::string err;
  EXPECT_EQ(pull({}, nullptr, &err), 2);
  EXPECT_THAT(err, HasSubstr("fetchd: pull needs --model"));
  EXPECT_EQ(pull({"--model", "bad id"}, nullptr, &err), 2);
  EXPECT_EQ(pull({"--model", "org/missing"}, nullptr, &err), 3);
  EXPECT_THAT(err, HasSubstr("fetchd: repository 'org/missing' was not found"));
  hub_.set_token("t");
  hub_.set_gated("org/model", true);
  EXPECT_EQ(pull({"--model", "org/model"}, nullptr, &err), 4);
  hub_.set_gated("org/model", false);
  hub_.faults().set_corrupt_lfs(true);
  EXPECT_EQ(pull({"--model", "org/model"}, nullptr, &err), 5);
  hub_.faults().set_corrupt_lfs(false);
  env_["HF_HUB_OFFLINE"] = "1";
  EXPECT_EQ(pull({"--model", "org/model"}, nullptr, &err), 6);
  env_["HF_HUB_OFFLINE"] = "";
  hub_.commit("org/bin", "main", {{"config.json", "{}", false}, {"pytorch_model.bin", "x", true}});
  EXPECT_EQ(pull({"--model", "org/bin"}, nullptr, &err), 8);
  // Network (7) needs retries to run out; the kinds' codes are checked one by one in FetchError's tests.
}

// What the hub or a user names reaches stderr escaped: no control byte from outside can forge a log line or
// drive the terminal.
TEST_F(FetchdBinary, OutsideStringsReachTheLogEscaped) {
  const auto no_control_bytes = [](const std::string& text) {
    for (const char c : text) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f) return false;
    }
    return true;
  };
  hub_.faults().override_tree("org/model", R"([{"type":"file","oid":"a1","size":1,"path":"mod\nel\r\u001b[31m.bin"}])");
  std::string err;
  EXPECT_EQ(pull({"--model", "org/model", "--verbose"}, nullptr, &err), 5);
  EXPECT_THAT(err, HasSubstr("'mod\\nel\\r\\x1b[31m.bin'"));
  EXPECT_TRUE(no_control_bytes(err)) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;  // one line, not a forged second one
  EXPECT_EQ(pull({"--model", "org/\x1b]0;owned\x07model\rfetchd: all good"}, nullptr, &err), 2);
  EXPECT_TRUE(no_control_bytes(err)) << err;
  EXPECT_THAT(err, HasSubstr("\\x1b]0;owned\\x07model\\rfetchd: all good"));
}

TEST_F(FetchdBinary, SigintCancelsAndKeepsThePartialFileForTheNextRun) {
  hub_.faults().set_stall_at(65536);
  env_["HF_HUB_DOWNLOAD_TIMEOUT"] = "60";
  ChildProcess child({FETCHD_BINARY, "pull", "--model", "org/model"}, env_);
  ASSERT_TRUE(testing_support::eventually([&] {
    std::error_code ec;
    return fs::file_size(partial(), ec) == 65536;
  }));
  child.signal(SIGINT);
  EXPECT_EQ(child.wait(std::chrono::seconds(20)), 7) << child.err();
  EXPECT_THAT(child.err(), HasSubstr("65536 bytes received are kept in " + partial().string()));
  EXPECT_EQ(fs::file_size(partial()), 65536u);

  hub_.faults().set_stall_at(std::nullopt);
  hub_.clear_requests();
  std::string out, err;
  ASSERT_EQ(pull({"--model", "org/model"}, &out, &err), 0) << err;
  bool resumed = false;
  for (const auto& r : hub_.requests()) resumed |= r.server == "lfs" && r.range == "bytes=65536-";
  EXPECT_TRUE(resumed);
}

TEST_F(FetchdBinary, ServeAnswersHealthAndSharesOneDownloadAmongConcurrentResolves) {
  const auto socket = home_.path() / "fetchd.sock";
  ChildProcess server({FETCHD_BINARY, "serve", "--listen", "unix:" + socket.string()}, env_);
  ASSERT_TRUE(testing_support::eventually([&] { return fs::exists(socket); })) << server.err();
  auto channel = grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials());

  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext health_context;
  grpc::health::v1::HealthCheckRequest health_request;
  grpc::health::v1::HealthCheckResponse health_response;
  ASSERT_TRUE(health->Check(&health_context, health_request, &health_response).ok());
  EXPECT_EQ(health_response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  hub_.faults().set_stall_at(200000);  // hold the first download so every caller joins it
  auto stub = fetch::v1::Fetch::NewStub(channel);
  std::vector<std::thread> callers;
  std::vector<fetch::v1::ResolveResult> results(4);
  std::vector<int> progress(4, 0);
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&, i] {
      grpc::ClientContext context;
      fetch::v1::ResolveRequest request;
      request.set_model("org/model");
      auto reader = stub->Resolve(&context, request);
      fetch::v1::ResolveEvent event;
      while (reader->Read(&event)) {
        if (event.has_result()) results[i] = event.result();
        if (event.has_progress()) ++progress[i];
      }
      EXPECT_TRUE(reader->Finish().ok());
    });
    if (i == 0) {
      ASSERT_TRUE(testing_support::eventually([&] {
        std::error_code ec;
        return fs::file_size(partial(), ec) == 200000;
      }));
    }
  }
  // Give every caller a chance to join the stalled flight, then let the download finish.
  ASSERT_TRUE(testing_support::eventually([&] {
    for (const int p : progress) {
      if (p == 0) return false;
    }
    return true;
  }));
  hub_.faults().set_stall_at(std::nullopt);
  for (auto& t : callers) t.join();
  for (const auto& r : results) {
    EXPECT_EQ(r.served_model_name(), "org/model");
    EXPECT_TRUE(fs::exists(fs::path(r.local_path()) / "model.safetensors"));
  }
  int lfs_downloads = 0;
  for (const auto& r : hub_.requests()) lfs_downloads += r.server == "lfs" && r.range.empty();
  EXPECT_EQ(lfs_downloads, 1);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(std::chrono::seconds(20)), 0);
}

TEST_F(FetchdBinary, ResolveErrorsCarryTheirKind) {
  const auto socket = home_.path() / "fetchd.sock";
  ChildProcess server({FETCHD_BINARY, "serve", "--listen", "unix:" + socket.string()}, env_);
  ASSERT_TRUE(testing_support::eventually([&] { return fs::exists(socket); })) << server.err();
  auto stub =
      fetch::v1::Fetch::NewStub(grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  fetch::v1::ResolveRequest request;
  request.set_model("org/missing");
  auto reader = stub->Resolve(&context, request);
  fetch::v1::ResolveEvent event;
  while (reader->Read(&event)) {
  }
  const auto status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("repository 'org/missing' was not found"));
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto kind = trailers.find("fetchd-error-kind");
  ASSERT_NE(kind, trailers.end());
  EXPECT_EQ(std::string(kind->second.data(), kind->second.size()), "not-found");
}

}  // namespace
