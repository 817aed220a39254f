#include "tests/support/serverd/test_model.h"

#include "tests/support/tiny_tokenizer.h"

namespace serverd_test {
namespace {

engine::tokenizer::Tokenizer make_tokenizer() {
  tiny::Spec spec;  // no merges: every byte is its own token
  spec.added_tokens =
      R"([{"id": 256, "content": "<|endoftext|>", "special": true, "normalized": false},
          {"id": 257, "content": "<|im_start|>", "special": true, "normalized": false},
          {"id": 258, "content": "<|im_end|>", "special": true, "normalized": false}])";
  return engine::tokenizer::Tokenizer::from_json(tiny::json(spec), "test_model/tokenizer.json",
                                                 R"({"eos_token": "<|endoftext|>", "bos_token": null})");
}

constexpr std::string_view kChatTemplate =
    "{%- for message in messages %}"
    "{%- if message.role == 'forbidden' %}{{ raise_exception('Role forbidden is not allowed') }}{%- endif %}"
    "{{ '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking %}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}";

}  // namespace

TestModel::TestModel()
    : tokenizer(make_tokenizer()), chat_template(engine::template_::ChatTemplate::parse(kChatTemplate)) {}

serverd::api::ModelInfo TestModel::info(std::size_t max_model_len) const {
  serverd::api::ModelInfo info;
  info.served_name = "test-model";
  info.root = "/models/test-model";
  info.tokenizer = &tokenizer;
  info.chat_template = &chat_template;
  info.max_model_len = max_model_len;
  info.eos_token_ids = {kEos};
  info.kv_cache.num_blocks = 64;
  return info;
}

std::vector<std::int32_t> bytes(std::string_view text) {
  std::vector<std::int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

}  // namespace serverd_test
