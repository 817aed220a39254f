#pragma once

// The grammar's view of a model's vocabulary, from the engine's tokenizer.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "engine/tokenizer/tokenizer.h"

namespace engine::grammar {

// Each id's raw bytes as decode produces them (byte-level BPE spellings such as "Ġthe" mapped back through
// the byte-level alphabet, so a token may end inside a UTF-8 character), the tokenizer's special flags, and
// `stop_ids`. Ids from the tokenizer's size up to `logits_width` (the model's padding rows) are empty, so
// never allowed. Throws GrammarError when the tokenizer has more ids than the logits, a stop id is outside
// them, or decode joins tokens with spaces (a tokenizer.json without a decoder), where no byte string per
// token describes the text.
TokenVocabulary vocabulary_from_tokenizer(const tokenizer::Tokenizer& tokenizer, std::size_t logits_width,
                                          std::vector<std::int32_t> stop_ids);

}  // namespace engine::grammar
