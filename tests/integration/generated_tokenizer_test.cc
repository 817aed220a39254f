// model-writer's generated tokenizers read by Hugging Face's own implementations: tokenizers (Rust, what
// transformers runs) and @huggingface/tokenizers (JavaScript) load each tokenizer.json and give the engine's
// ids on the conformance corpus, so the generated files are real tokenizers, not ones only this engine reads.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "engine/model_writer/model_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/interop/tokenizer_corpus.h"
#include "tests/support/temp_dir.h"

namespace {

using engine::model::Architecture;

std::vector<std::int32_t> ids_of(const rapidjson::Value& array) {
  std::vector<std::int32_t> ids;
  for (const auto& id : array.GetArray()) ids.push_back(id.GetInt());
  return ids;
}

class GeneratedTokenizer : public ::testing::TestWithParam<Architecture> {};

INSTANTIATE_TEST_SUITE_P(Archs, GeneratedTokenizer, ::testing::Values(Architecture::Qwen3, Architecture::Llama),
                         [](const auto& param_info) {
                           return param_info.param == Architecture::Llama ? "Llama" : "Qwen";
                         });

TEST_P(GeneratedTokenizer, HuggingFaceImplementationsGiveTheEnginesIds) {
  const testing_support::TempDir dir;
  engine::tools::ModelWriterOptions options;
  options.arch = GetParam();
  options.out_dir = dir / "model";
  options.safetensors = false;
  engine::tools::write_model(options);

  auto corpus = testing_support::tokenizer_corpus(300);
  corpus.emplace_back("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  corpus.emplace_back("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
  testing_support::write_file(dir / "corpus.json", testing_support::corpus_to_json(corpus));
  const std::string command = std::string("'") + NODE_EXECUTABLE + "' '" + TOKENIZER_REFERENCE_SCRIPT + "' '" +
                              (dir / "model" / "tokenizer_config.json").string() + "' '" +
                              (dir / "corpus.json").string() + "' '" + (dir / "reference.json").string() + "' '" +
                              (dir / "model" / "tokenizer.json").string() + "'";
  std::string output;
  ASSERT_EQ(testing_support::run_command(command, output), 0) << output;
  const auto bytes = testing_support::read_file(dir / "reference.json");
  rapidjson::Document reference;
  reference.Parse(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_FALSE(reference.HasParseError());
  ASSERT_TRUE(reference.IsArray() && reference.Size() == 1);
  const auto& result = reference[0];
  ASSERT_TRUE(result["js"].IsArray()) << "tokenizers.js refused the file: " << result["js_error"].GetString();

  const auto tokenizer = engine::tokenizer::Tokenizer::from_directory(dir / "model");
  std::size_t rust_mismatches = 0, js_mismatches = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const auto ours = tokenizer.encode(corpus[i], true);
    const auto rust = ids_of(result["rust"][static_cast<rapidjson::SizeType>(i)]);
    const auto js = ids_of(result["js"][static_cast<rapidjson::SizeType>(i)]);
    if (ours != rust && ++rust_mismatches <= 3) ADD_FAILURE() << "Rust tokenizers disagrees on string " << i;
    if (ours != js && ++js_mismatches <= 3) ADD_FAILURE() << "tokenizers.js disagrees on string " << i;
  }
  EXPECT_EQ(rust_mismatches, 0u);
  EXPECT_EQ(js_mismatches, 0u);
}

}  // namespace
