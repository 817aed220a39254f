// vLLM's route templates matched against paths, and the methods each route serves.
#include "serverd/api/endpoints.h"

#include <gtest/gtest.h>

namespace serverd::api {
namespace {

TEST(Endpoints, TemplatesMatchWholeSegments) {
  ASSERT_NE(find_route("/v1/completions"), nullptr);
  EXPECT_EQ(find_route("/v1/completions")->endpoint, Endpoint::kCompletions);
  EXPECT_EQ(find_route("/v1/completions/x"), nullptr);
  EXPECT_EQ(find_route("/v1/complet"), nullptr);
  // {name}: one non-empty segment.
  ASSERT_NE(find_route("/v1/responses/r1"), nullptr);
  EXPECT_EQ(find_route("/v1/responses/r1")->path, "/v1/responses/{response_id}");
  EXPECT_EQ(find_route("/v1/responses/r1/cancel")->path, "/v1/responses/{response_id}/cancel");
  EXPECT_EQ(find_route("/v1/responses//cancel"), nullptr);
  EXPECT_EQ(find_route("/v1/responses/r1/other"), nullptr);
  // {name:path}: the non-empty rest, slashes included (hub names have one).
  ASSERT_NE(find_route("/v1/models/Qwen/Qwen3-0.6B"), nullptr);
  EXPECT_EQ(find_route("/v1/models/Qwen/Qwen3-0.6B")->status, 404);
  EXPECT_EQ(find_route("/v1/models/"), nullptr);
  EXPECT_EQ(find_route("/v1/models")->endpoint, Endpoint::kModels);
}

TEST(Endpoints, MethodsServedAndRefusalsForAny) {
  const Route& ping = *find_route("/ping");
  EXPECT_TRUE(allows(ping, "GET"));
  EXPECT_TRUE(allows(ping, "POST"));
  EXPECT_FALSE(allows(ping, "PUT"));
  EXPECT_FALSE(allows(ping, "GE"));
  EXPECT_FALSE(allows(*find_route("/v1/completions"), "GET"));
  const Route& embeddings = *find_route("/v1/embeddings");
  EXPECT_EQ(embeddings.endpoint, Endpoint::kEmbeddings);
  EXPECT_FALSE(allows(embeddings, "GET"));
  const Route& score = *find_route("/v1/score");
  EXPECT_EQ(score.endpoint, Endpoint::kRefused);
  EXPECT_EQ(score.status, 501);
  EXPECT_TRUE(allows(score, "DELETE"));  // refused whatever the method
}

}  // namespace
}  // namespace serverd::api
