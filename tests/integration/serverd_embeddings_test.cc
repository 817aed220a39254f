// POST /v1/embeddings over loopback, as vLLM's pooling runner answers it: OpenAI's response shape with
// floats or base64, every input its own pooling sequence, dimensions checked against the model's matryoshka
// lengths, and the refusals both ways (a generation model asked for embeddings, a pooling model asked to
// generate) with vLLM's messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <mutex>

#include "tests/support/serverd/api_test_fixture.h"

namespace serverd::api {
namespace {

using ::testing::ElementsAreArray;

// RFC 4648 base64 of little-endian float32 values, decoded.
std::vector<float> decode_floats(std::string_view text) {
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes;
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    if (c == '=') break;
    const auto at = kAlphabet.find(c);
    if (at == std::string_view::npos) {
      ADD_FAILURE() << "not base64: " << c;
      return {};
    }
    bits = (bits << 6) | static_cast<std::uint32_t>(at);
    if ((count += 6) >= 8) {
      count -= 8;
      bytes.push_back(static_cast<unsigned char>((bits >> count) & 0xff));
    }
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

std::vector<float> floats(const rapidjson::Value& array) {
  std::vector<float> out;
  for (const auto& x : array.GetArray()) out.push_back(static_cast<float>(x.GetDouble()));
  return out;
}

class EmbeddingsApiTest : public serverd_test::ApiServerTest {
 protected:
  // Serves the test model as a pooling model (last token, normalised) with `matryoshka`.
  void serve_pooling(engine::model::Matryoshka matryoshka = {},
                     const std::function<void(ApiServerOptions&)>& tweak = {}) {
    start(tweak, false);
    auto info = model_.info(256);
    info.pooling = engine::model::PoolingConfig{engine::model::PoolingType::Last, true};
    info.matryoshka = std::move(matryoshka);
    server_->serve(info, generator_);
  }
};

TEST_F(EmbeddingsApiTest, ResponseShapeWithOneSequencePerInput) {
  serve_pooling();
  const auto reply = post("/v1/embeddings", R"({"model": "test-model", "input": ["ab", "cde"]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto body = serverd_test::json(reply.body);
  EXPECT_EQ(serverd_test::str(body["object"]), "list");
  EXPECT_EQ(std::string(body["id"].GetString()).rfind("embd-", 0), 0u);
  EXPECT_TRUE(body["created"].IsInt64());
  EXPECT_EQ(serverd_test::str(body["model"]), "test-model");

  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  ASSERT_EQ(body["data"].Size(), 2u);
  std::size_t prompt_tokens = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const auto& request = submitted[i];
    EXPECT_EQ(request.max_tokens, 0u);
    ASSERT_TRUE(request.pooling);
    EXPECT_EQ(request.pooling->config.type, engine::model::PoolingType::Last);
    EXPECT_TRUE(request.pooling->config.normalize);
    prompt_tokens += request.prompt_tokens.size();
    const auto& item = body["data"][static_cast<rapidjson::SizeType>(i)];
    EXPECT_EQ(item["index"].GetUint64(), i);
    EXPECT_EQ(serverd_test::str(item["object"]), "embedding");
    EXPECT_THAT(floats(item["embedding"]), ElementsAreArray(serverd_test::FakeGenerator::embedding_of(request)));
  }
  EXPECT_EQ(submitted[0].prompt_tokens, serverd_test::bytes("ab"));
  EXPECT_EQ(body["usage"]["prompt_tokens"].GetUint64(), prompt_tokens);
  EXPECT_EQ(body["usage"]["total_tokens"].GetUint64(), prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"].GetUint64(), 0u);
}

TEST_F(EmbeddingsApiTest, Base64IsTheFloatsLittleEndianBytes) {
  serve_pooling();
  const auto reply = post("/v1/embeddings", R"({"input": [[5, 6, 7]], "encoding_format": "base64"})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto body = serverd_test::json(reply.body);
  const auto& embedding = body["data"][0]["embedding"];
  ASSERT_TRUE(embedding.IsString());
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].prompt_tokens, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_THAT(decode_floats(serverd_test::str(embedding)),
              ElementsAreArray(serverd_test::FakeGenerator::embedding_of(submitted[0])));
}

TEST_F(EmbeddingsApiTest, DimensionsOnlyWhereTheModelIsMatryoshka) {
  serve_pooling();
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "dimensions": 4})"), 400, "BadRequestError",
                             "dimensions",
                             "Model \"test-model\" does not support matryoshka representation, changing output "
                             "dimensions will lead to poor results.");
  server_.reset();

  serve_pooling({true, {4, 6}});
  const auto reply = post("/v1/embeddings", R"({"input": "ab", "dimensions": 4, "normalize": false})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(serverd_test::json(reply.body)["data"][0]["embedding"].Size(), 4u);
  const auto submitted = generator_.submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].pooling->dimensions, 4u);
  EXPECT_FALSE(submitted[0].pooling->config.normalize);
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "dimensions": 5})"), 400, "BadRequestError",
                             "dimensions", "only supports [4, 6] matryoshka dimensions");
  server_.reset();

  serve_pooling({true, {}});
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "dimensions": 0})"), 400, "BadRequestError",
                             "dimensions", "Dimensions must be greater than 0");
}

TEST_F(EmbeddingsApiTest, BadRequestsAreRefusedByName) {
  serve_pooling();
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "encoding_format": "bytes"})"), 400,
                             "BadRequestError", "encoding_format", "encoding_format must be 'float' or 'base64'");
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "embed_dtype": "float16"})"), 400,
                             "BadRequestError", "embed_dtype", "'embed_dtype' is not supported by this server");
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "endianness": "big"})"), 400, "BadRequestError",
                             "endianness", "'endianness' is not supported by this server");
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": ""})"), 400, "BadRequestError", "input",
                             "'input' must be provided and non-empty.");
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": [[1, 999999]]})"), 400, "BadRequestError", "input",
                             "Token id 999999 is out of vocabulary");
  serverd_test::expect_error(post("/v1/embeddings", R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
                             "BadRequestError", "messages", "'messages' is not supported by this server");
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab", "model": "other"})"), 404, "NotFoundError",
                             "model", "The model `other` does not exist.");
  EXPECT_EQ(generator_.submitted_count(), 0u);
  // The defaults of both base64 variants are what serverd writes.
  EXPECT_EQ(post("/v1/embeddings", R"({"input": "ab", "embed_dtype": "float32", "endianness": "little"})").status, 200);
}

TEST_F(EmbeddingsApiTest, APoolingModelGeneratesNothing) {
  serve_pooling();
  serverd_test::expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
                             "BadRequestError", std::nullopt, "The model does not support Chat Completions API");
  serverd_test::expect_error(post("/v1/completions", R"({"prompt": "x"})"), 400, "BadRequestError", std::nullopt,
                             "The model does not support Completions API");
  serverd_test::expect_error(post("/v1/responses", R"({"input": "x"})"), 400, "BadRequestError", std::nullopt,
                             "The model does not support Responses API");
  // /invocations takes an embeddings request for it.
  EXPECT_EQ(post("/invocations", R"({"input": "ab"})").status, 200);
  EXPECT_EQ(generator_.submitted_count(), 1u);
}

TEST_F(EmbeddingsApiTest, EnableLogRequestsLogsEachEmbeddingsRequest) {
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mutex = std::make_shared<std::mutex>();
  serve_pooling({}, [&](ApiServerOptions& o) {
    o.api.request_log = [lines, mutex](const std::string& line) {
      const std::lock_guard lock(*mutex);
      lines->push_back(line);
    };
  });
  ASSERT_EQ(post("/v1/embeddings", R"({"input": ["ab", "cde"]})", {"X-Request-Id: r1"}).status, 200);
  const std::lock_guard lock(*mutex);
  EXPECT_THAT(*lines, ::testing::ElementsAre("request embd-r1: prompt tokens 2, 3, max_tokens 0, n 1"));
}

TEST_F(EmbeddingsApiTest, AGenerationModelRefusesEmbeddingsAsVllmDoes) {
  start();
  serverd_test::expect_error(post("/v1/embeddings", R"({"input": "ab"})"), 400, "BadRequestError", std::nullopt,
                             "The model does not support Embeddings API");
  EXPECT_EQ(generator_.submitted_count(), 0u);
}

}  // namespace
}  // namespace serverd::api
