#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "engine/tokenizer/tokenizer_model.h"
#include "engine/tokenizer/unicode.h"

namespace engine::tokenizer {

std::shared_ptr<const TokenizerModel> assemble(TokenizerParts parts) {
  auto model = std::make_shared<TokenizerModel>();
  model->name = parts.name;
  model->config = std::move(parts.config);
  model->decoder = parts.decoder;
  model->chain = std::move(parts.chain);
  model->post_processor = std::move(parts.post_processor);

  try {
    model->model = std::make_unique<BpeModel>(parts.vocab, parts.merges, parts.bpe, parts.merge_ranks);
  } catch (const std::invalid_argument& e) {
    throw TokenizerError(parts.name + ": " + parts.merges_field + ": " + e.what());
  }

  std::size_t size = parts.min_vocab_size;
  for (const auto& [token, id] : parts.vocab) size = std::max(size, static_cast<std::size_t>(id) + 1);
  for (const auto& token : parts.added_tokens) size = std::max(size, static_cast<std::size_t>(token.id) + 1);
  model->tokens.resize(size);
  model->flags.assign(size, 0);

  // The reference looks ids up among the added tokens first, then in the model. An added token that
  // matches its normalized form stands for that form when decoding (and in id_to_token).
  for (const auto& token : parts.added_tokens) {
    const auto id = static_cast<std::size_t>(token.id);
    std::string text = token.content;
    if (token.normalized && parts.normalizer) parts.normalizer->normalize(text);
    model->tokens[id] = std::move(text);
    model->flags[id] = TokenizerModel::kKnown;
    model->added_ids.try_emplace(token.content, token.id);
  }
  for (const auto& [token, id] : parts.vocab) {
    const auto index = static_cast<std::size_t>(id);
    if (!(model->flags[index] & TokenizerModel::kKnown)) {
      model->tokens[index] = token;
      model->flags[index] = TokenizerModel::kKnown;
    }
  }
  for (std::size_t id = 0; id < size; ++id) {
    if ((model->flags[id] & TokenizerModel::kKnown) && parts.special_contents.count(model->tokens[id]) != 0) {
      model->flags[id] |= TokenizerModel::kSpecial;
      model->special_ids.push_back(static_cast<std::int32_t>(id));
    }
  }

  // What each id decodes to. The byte-level decoder maps a token's characters back to bytes, or keeps the
  // token's own UTF-8 when a character is outside the alphabet (as the reference does per token).
  model->decoded.resize(size);
  for (std::size_t id = 0; id < size; ++id) {
    if (!(model->flags[id] & TokenizerModel::kKnown)) continue;
    if (model->decoder == DecoderKind::ByteLevel) {
      auto bytes = unicode::byte_level_to_bytes(model->tokens[id]);
      model->decoded[id] = bytes ? std::move(*bytes) : model->tokens[id];
    } else if (model->decoder == DecoderKind::Chain) {
      model->decoded[id] = model->chain->piece(model->tokens[id]);
    } else {
      model->decoded[id] = model->tokens[id];
    }
  }

  model->normalizer = std::move(parts.normalizer);
  model->pre_tokenizer = std::move(parts.pre_tokenizer);
  model->added = std::make_unique<AddedVocabulary>(std::move(parts.added_tokens), model->normalizer.get());

  const auto resolve = [&](const std::optional<std::int32_t>& explicit_id,
                           const std::optional<std::string>& name) -> std::optional<std::int32_t> {
    if (explicit_id) return explicit_id;
    if (!name) return std::nullopt;
    return model->token_to_id(*name);
  };
  model->bos_id = resolve(parts.bos_id, model->config.bos_token);
  model->eos_id = resolve(parts.eos_id, model->config.eos_token);
  model->pad_id = resolve(parts.pad_id, model->config.pad_token);
  return model;
}

namespace {

// Per-call working state for encode; concurrent calls share nothing mutable (the BPE word cache and the
// regex match data are per thread).
class Encoder {
 public:
  Encoder(const TokenizerModel& model, std::vector<std::int32_t>& ids) : model_(model), ids_(ids) {}

  void encode(std::string_view text) {
    model_.added->split(
        text, false, [&](std::string_view segment) { encode_segment(segment, segment.data() == text.data()); },
        [this](std::int32_t id) { ids_.push_back(id); });
  }

 private:
  // Text between added tokens: normalize, look for normalized added tokens, pre-tokenize, run the model.
  // `at_start`: the segment begins the input.
  void encode_segment(std::string_view segment, bool at_start) {
    std::string normalized;
    std::string_view text = segment;
    if (model_.normalizer && !model_.normalizer->leaves_alone(segment)) {
      normalized.assign(segment);
      model_.normalizer->normalize(normalized);
      text = normalized;
    }
    if (text.empty()) return;
    if (model_.added->has_normalized_tokens()) {
      model_.added->split(
          text, true, [&](std::string_view piece) { encode_words(piece, at_start && piece.data() == text.data()); },
          [this](std::int32_t id) { ids_.push_back(id); });
    } else {
      encode_words(text, at_start);
    }
  }

  void encode_words(std::string_view text, bool at_start) {
    pieces_.reset(text, at_start);
    if (model_.pre_tokenizer) model_.pre_tokenizer->pre_tokenize(pieces_);
    for (const std::string_view word : pieces_.views) model_.model->tokenize(word, ids_);
  }

  const TokenizerModel& model_;
  std::vector<std::int32_t>& ids_;
  Pieces pieces_;
};

}  // namespace

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_into(text, add_special_tokens, ids);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, bool add_special_tokens, std::vector<std::int32_t>& ids) const {
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    unicode::append_utf8_lossy(text, repaired, true);
    text = repaired;
  }
  const auto& post = model_->post_processor;
  if (add_special_tokens) ids.insert(ids.end(), post.prefix.begin(), post.prefix.end());
  Encoder(*model_, ids).encode(text);
  if (add_special_tokens) ids.insert(ids.end(), post.suffix.begin(), post.suffix.end());
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  const auto& m = *model_;
  if (m.decoder == DecoderKind::Chain) {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const std::int32_t id : ids) {
      if (m.known(id) && !(skip_special_tokens && m.special(id)))
        tokens.push_back(m.tokens[static_cast<std::size_t>(id)]);
    }
    return m.chain->decode(std::move(tokens), true);
  }
  std::string bytes;
  bool first = true;
  for (const std::int32_t id : ids) {
    if (!m.known(id) || (skip_special_tokens && m.special(id))) continue;
    if (m.decoder == DecoderKind::Join && !first) bytes += ' ';
    bytes += m.decoded[static_cast<std::size_t>(id)];
    first = false;
  }
  if (m.decoder == DecoderKind::Join) return bytes;  // token texts are valid UTF-8 already
  std::string text;
  text.reserve(bytes.size());
  unicode::append_utf8_lossy(bytes, text, true);
  return text;
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return model_->token_to_id(token);
}

std::optional<std::string_view> Tokenizer::id_to_token(std::int32_t id) const {
  if (!model_->known(id)) return std::nullopt;
  return model_->tokens[static_cast<std::size_t>(id)];
}

std::optional<std::string_view> Tokenizer::id_to_bytes(std::int32_t id) const {
  if (!model_->known(id)) return std::nullopt;
  return model_->decoded[static_cast<std::size_t>(id)];
}

bool Tokenizer::decode_joins_with_spaces() const {
  return model_->decoder == DecoderKind::Join;
}

std::size_t Tokenizer::vocab_size() const {
  return model_->tokens.size();
}
bool Tokenizer::is_special(std::int32_t id) const {
  return model_->special(id);
}
std::span<const std::int32_t> Tokenizer::special_ids() const {
  return model_->special_ids;
}
std::optional<std::int32_t> Tokenizer::bos_id() const {
  return model_->bos_id;
}
std::optional<std::int32_t> Tokenizer::eos_id() const {
  return model_->eos_id;
}
std::optional<std::int32_t> Tokenizer::pad_id() const {
  return model_->pad_id;
}
const TokenizerConfig& Tokenizer::config() const {
  return model_->config;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : model_(tokenizer.model_), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDecoder::push(std::int32_t id) {
  const auto& m = *model_;
  if (!m.known(id) || (skip_special_tokens_ && m.special(id))) return {};
  if (m.decoder == DecoderKind::Chain) {
    // Tokens wait until the chain says no later token can change what they decode to.
    window_.push_back(m.tokens[static_cast<std::size_t>(id)]);
    if (!m.chain->settled(window_, first_)) return {};
    std::string text = m.chain->decode(std::move(window_), first_);
    window_.clear();
    first_ = false;
    return text;
  }
  const std::string& piece = m.decoded[static_cast<std::size_t>(id)];
  if (m.decoder == DecoderKind::Join) {
    std::string text = first_ ? piece : " " + piece;
    first_ = false;
    return text;
  }
  first_ = false;
  pending_ += piece;
  std::string text;
  const std::size_t consumed = unicode::append_utf8_lossy(pending_, text, false);
  pending_.erase(0, consumed);
  return text;
}

std::string IncrementalDecoder::flush() {
  if (model_->decoder == DecoderKind::Chain) {
    std::string text = window_.empty() ? std::string() : model_->chain->decode(std::move(window_), first_);
    window_.clear();
    first_ = true;
    return text;
  }
  std::string text;
  unicode::append_utf8_lossy(pending_, text, true);
  pending_.clear();
  first_ = true;
  return text;
}

}  // namespace engine::tokenizer
