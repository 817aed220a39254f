#include "fetchd/hub/hub_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "fetchd/request/fetch_error.h"
#include "tests/support/environment.h"
#include "tests/support/temp_dir.h"

namespace fetchd::hub {
namespace {

using ::testing::HasSubstr;

Environment env_of(std::map<std::string, std::string> vars) {
  return testing_support::map_environment(std::move(vars));
}

TEST(HubSettings, DefaultsFollowHuggingfaceHub) {
  const auto s = read_hub_settings(env_of({{"HOME", "/home/u"}}));
  EXPECT_EQ(s.hf_home, "/home/u/.cache/huggingface");
  EXPECT_EQ(s.cache_dir, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_FALSE(s.token);
  EXPECT_FALSE(s.offline);
  EXPECT_EQ(s.etag_timeout, std::chrono::seconds(10));
  EXPECT_EQ(s.download_timeout, std::chrono::seconds(10));
}

TEST(HubSettings, CacheRootPrecedence) {
  std::map<std::string, std::string> vars{{"HOME", "/h"},
                                          {"XDG_CACHE_HOME", "/xdg"},
                                          {"HF_HOME", "/hf"},
                                          {"HUGGINGFACE_HUB_CACHE", "/legacy"},
                                          {"HF_HUB_CACHE", "/hub"}};
  EXPECT_EQ(read_hub_settings(env_of(vars)).cache_dir, "/hub");
  EXPECT_EQ(read_hub_settings(env_of(vars), "/dl").cache_dir, "/dl");  // --download-dir beats all
  vars["HF_HUB_CACHE"] = "";                                           // empty counts as unset
  EXPECT_EQ(read_hub_settings(env_of(vars)).cache_dir, "/legacy");
  vars.erase("HUGGINGFACE_HUB_CACHE");
  EXPECT_EQ(read_hub_settings(env_of(vars)).cache_dir, "/hf/hub");
  vars.erase("HF_HOME");
  EXPECT_EQ(read_hub_settings(env_of(vars)).cache_dir, "/xdg/huggingface/hub");
  vars["HF_HUB_CACHE"] = "~/cache";
  EXPECT_EQ(read_hub_settings(env_of(vars)).cache_dir, "/h/cache");
}

TEST(HubSettings, TokenPrecedenceAndTokenFile) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "token", std::string_view("  hf_file\r\n"));
  std::map<std::string, std::string> vars{{"HF_HOME", dir.path().string()}};
  EXPECT_EQ(read_hub_settings(env_of(vars)).token, "hf_file");  // $HF_HOME/token, trimmed
  vars["HUGGING_FACE_HUB_TOKEN"] = "hf_legacy";
  EXPECT_EQ(read_hub_settings(env_of(vars)).token, "hf_legacy");
  vars["HF_TOKEN"] = " hf_env\n";
  EXPECT_EQ(read_hub_settings(env_of(vars)).token, "hf_env");
  vars.erase("HF_TOKEN");
  vars.erase("HUGGING_FACE_HUB_TOKEN");
  testing_support::write_file(dir / "other", std::string_view("hf_other"));
  vars["HF_TOKEN_PATH"] = (dir / "other").string();
  EXPECT_EQ(read_hub_settings(env_of(vars)).token, "hf_other");
  testing_support::write_file(dir / "other", std::string_view(" \n"));
  EXPECT_FALSE(read_hub_settings(env_of(vars)).token);  // a blank file is no token
}

TEST(HubSettings, OfflineAndSwitchesAcceptHuggingfaceHubTruthValues) {
  for (const char* yes : {"1", "ON", "yes", "True", "tRuE"}) {
    EXPECT_TRUE(read_hub_settings(env_of({{"HF_HUB_OFFLINE", yes}})).offline) << yes;
  }
  for (const char* no : {"0", "off", "no", "false", "2", ""}) {
    EXPECT_FALSE(read_hub_settings(env_of({{"HF_HUB_OFFLINE", no}})).offline) << no;
  }
  EXPECT_TRUE(read_hub_settings(env_of({{"TRANSFORMERS_OFFLINE", "1"}})).offline);
  EXPECT_TRUE(read_hub_settings(env_of({{"HF_HUB_DISABLE_XET", "1"}})).disable_xet);
  EXPECT_TRUE(read_hub_settings(env_of({{"HF_HUB_DISABLE_SYMLINKS", "yes"}})).disable_symlinks);
}

TEST(HubSettings, EndpointAndTimeouts) {
  const auto s = read_hub_settings(env_of(
      {{"HF_ENDPOINT", "http://127.0.0.1:8080//"}, {"HF_HUB_ETAG_TIMEOUT", "2.5"}, {"HF_HUB_DOWNLOAD_TIMEOUT", "30"}}));
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(s.etag_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(s.download_timeout, std::chrono::seconds(30));
  try {
    read_hub_settings(env_of({{"HF_HUB_DOWNLOAD_TIMEOUT", "soon"}}));
    FAIL() << "accepted a malformed timeout";
  } catch (const FetchError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HF_HUB_DOWNLOAD_TIMEOUT='soon' is not a positive number of seconds"));
  }
}

TEST(EndpointTransport, HttpsNeedsABuildWithHttps) {
  EXPECT_NO_THROW(check_endpoint_transport("http://mirror.local", false));
  EXPECT_NO_THROW(check_endpoint_transport("https://huggingface.co", true));
  try {
    check_endpoint_transport("https://huggingface.co", false);
    FAIL() << "an HTTPS-less build accepted https://";
  } catch (const FetchError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_THAT(e.what(), HasSubstr("cannot speak HTTPS, so it cannot reach https://huggingface.co"));
    EXPECT_THAT(e.what(), HasSubstr("-DFETCHD_HTTPS=ON"));
    EXPECT_THAT(e.what(), HasSubstr("HF_ENDPOINT to an http:// mirror"));
  }
  EXPECT_THROW(check_endpoint_transport("ftp://x", true), FetchError);
}

// Userinfo in HF_ENDPOINT would be sent as Basic credentials and could ride a redirect: refused, without
// repeating the password, pointing at HF_TOKEN.
TEST(EndpointTransport, RefusesUserinfoInTheEndpoint) {
  for (const char* endpoint : {"http://user:hunter2@mirror.local", "https://hunter2@mirror.local:8443/hub"}) {
    try {
      check_endpoint_transport(endpoint, true);
      ADD_FAILURE() << "accepted " << endpoint;
    } catch (const FetchError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_THAT(e.what(), HasSubstr("HF_TOKEN"));
      EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("hunter2")));
    }
  }
}

TEST(EndpointTransport, ThisBuildHasHttps) {  // the default build; FETCHD_HTTPS=OFF is checked by a slow test
  EXPECT_TRUE(https_built());
}

}  // namespace
}  // namespace fetchd::hub
