#include "engine/grammar/token_vocabulary.h"

#include <string>

namespace engine::grammar {

TokenVocabulary vocabulary_from_tokenizer(const tokenizer::Tokenizer& tokenizer, std::size_t logits_width,
                                          std::vector<std::int32_t> stop_ids) {
  if (tokenizer.decode_joins_with_spaces()) {
    throw GrammarError(
        "structured outputs need a tokenizer whose decoded text is its tokens' bytes one after another; this "
        "tokenizer.json has no decoder, so decode puts spaces between tokens");
  }
  if (tokenizer.vocab_size() > logits_width) {
    throw GrammarError("the tokenizer has " + std::to_string(tokenizer.vocab_size()) + " ids but the logits only " +
                       std::to_string(logits_width) + "; structured outputs need a logit for every token");
  }
  TokenVocabulary vocabulary;
  vocabulary.token_bytes.resize(logits_width);
  vocabulary.special.assign(logits_width, false);
  for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const auto token = static_cast<std::int32_t>(id);
    if (const auto bytes = tokenizer.id_to_bytes(token)) vocabulary.token_bytes[id] = std::string(*bytes);
    vocabulary.special[id] = tokenizer.is_special(token);
  }
  for (const std::int32_t id : stop_ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits_width) {
      throw GrammarError("stop id " + std::to_string(id) + " is outside the vocabulary of " +
                         std::to_string(logits_width) + " ids");
    }
  }
  vocabulary.stop_ids = std::move(stop_ids);
  return vocabulary;
}

}  // namespace engine::grammar
