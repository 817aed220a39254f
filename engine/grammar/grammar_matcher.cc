// GrammarMatcher: one sequence's set of stack positions, advanced token by token over the tokens' bytes,
// and the token mask: each position's cached context-independent set, plus the uncertain tokens checked
// against the real stack by a walk that shares common prefixes.

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/position_set_table.h"
#include "engine/grammar/structured_output.h"

namespace engine::grammar {
namespace {

void set_bit(std::span<std::uint32_t> mask, std::int32_t id) {
  const auto i = static_cast<std::uint32_t>(id);
  mask[i / 32] |= std::uint32_t{1} << (i % 32);
}
void clear_bit(std::span<std::uint32_t> mask, std::int32_t id) {
  const auto i = static_cast<std::uint32_t>(id);
  mask[i / 32] &= ~(std::uint32_t{1} << (i % 32));
}

}  // namespace

struct GrammarMatcher::State {
  explicit State(std::shared_ptr<const CompiledGrammar> compiled) : grammar(std::move(compiled)) {}

  std::shared_ptr<const CompiledGrammar> grammar;
  StackPool pool;
  std::vector<StackElement> elements;  // sorted by key, unique
  bool can_end = false;                // the text so far is a complete match
  bool stopped = false;                // a stop id was accepted

  // Scratch, kept to avoid allocations per call.
  DepthStates walk;
  StackPool next_pool;
  std::vector<std::uint32_t> copied;  // old frame id -> new, during compaction
  std::vector<std::uint32_t> rejected_scratch;
  std::vector<std::uint32_t> difference_scratch;
  PositionSetTable sets{grammar->walker(), &pool};  // (declared after grammar and pool, which it uses)
  std::vector<std::uint32_t> set_at;                // check_tokens: the set after each depth of a token

  const SortedVocabulary& vocabulary() const { return grammar->vocabulary(); }

  // Rebuilds the pool with only the frames the current positions use, so it does not grow with the text.
  void compact() {
    next_pool.clear();
    copied.assign(pool.size(), UINT32_MAX);
    const auto copy = [&](const auto& self, std::uint32_t id) -> std::uint32_t {
      if (id == StackPool::kRoot) return id;
      if (copied[id] != UINT32_MAX) return copied[id];
      const StackPool::Frame frame = pool.frame(id);
      return copied[id] = next_pool.intern(frame.node, self(self, frame.parent));
    };
    for (StackElement& element : elements) element.parent = copy(copy, element.parent);
    std::swap(pool, next_pool);
    AutomatonWalker::dedupe(elements, 0);
  }

  // ORs (or, when `overwrite`, writes) the context-independent accepted set of `node` into `mask`.
  void apply_cached(std::uint32_t node, std::span<std::uint32_t> mask, bool overwrite) {
    const TokenMaskCache& masks = grammar->masks();
    const NodeTokenMask& cached = masks.at(node);
    if (cached.base == NodeTokenMask::kSelf) {
      apply_stored(cached, mask, overwrite);
      return;
    }
    // A difference from another copy's set: build it whole, then merge.
    const TokenMaskCache::Difference difference = masks.difference(cached);
    std::span<std::uint32_t> target = mask;
    if (!overwrite) {
      difference_scratch.resize(vocabulary().bitmask_words());
      target = difference_scratch;
    }
    apply_stored(masks.at(difference.base), target, true);
    for (const std::int32_t id : difference.set_ids) set_bit(target, id);
    for (const std::int32_t id : difference.clear_ids) clear_bit(target, id);
    if (!overwrite) {
      for (std::size_t w = 0; w < target.size(); ++w) mask[w] |= target[w];
    }
  }

  void apply_stored(const NodeTokenMask& cached, std::span<std::uint32_t> mask, bool overwrite) {
    const TokenMaskCache& masks = grammar->masks();
    const std::size_t words = vocabulary().bitmask_words();
    switch (cached.form) {
      case NodeTokenMask::Form::Accepted:
        if (overwrite) std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(words), 0u);
        for (const std::int32_t id : masks.ids(cached)) set_bit(mask, id);
        break;
      case NodeTokenMask::Form::Bitmask: {
        const auto bits = masks.words(cached);
        if (overwrite) {
          std::copy(bits.begin(), bits.end(), mask.begin());
        } else {
          for (std::size_t w = 0; w < words; ++w) mask[w] |= bits[w];
        }
        break;
      }
      case NodeTokenMask::Form::Rejected: {
        // Everything producible but the rejected and the uncertain ids.
        const auto producible = vocabulary().producible();
        std::span<std::uint32_t> target = mask;
        if (!overwrite) {
          rejected_scratch.assign(words, 0);
          target = rejected_scratch;
        }
        std::copy(producible.begin(), producible.end(), target.begin());
        for (const std::int32_t id : masks.ids(cached)) clear_bit(target, id);
        for (const std::uint32_t k : masks.uncertain(cached)) clear_bit(target, vocabulary().id(k));
        if (!overwrite) {
          for (std::size_t w = 0; w < words; ++w) mask[w] |= target[w];
        }
        break;
      }
    }
  }

  // Sets the bits of the uncertain tokens of `group`'s top node that the group's real stacks accept (a
  // difference from another copy walks that copy's uncertain tokens and its own extra ones).
  void check_uncertain(std::span<const StackElement> group, std::span<std::uint32_t> mask) {
    const TokenMaskCache& masks = grammar->masks();
    const NodeTokenMask& cached = masks.at(group.front().node);
    if (cached.base == NodeTokenMask::kSelf) {
      check_tokens(group, masks.uncertain(cached), mask);
      return;
    }
    const TokenMaskCache::Difference difference = masks.difference(cached);
    check_tokens(group, masks.uncertain(masks.at(difference.base)), mask);
    check_tokens(group, difference.extra_uncertain, mask);
  }

  // Sets the bits of the `uncertain` tokens (sorted indices, ascending) that `group`'s stacks accept. The
  // tokens share prefixes (the walk rolls back to the common one, and skips tokens under a dead prefix),
  // and the steps are memoized: within a string, say, every prefix of one length reaches the same positions.
  void check_tokens(std::span<const StackElement> group, std::span<const std::uint32_t> uncertain,
                    std::span<std::uint32_t> mask) {
    if (uncertain.empty()) return;
    const SortedVocabulary& vocab = vocabulary();
    sets.clear();  // its sets name frames of `pool`, which compaction renumbers between calls
    set_at.assign(1, sets.start(group));
    std::string_view previous;
    std::size_t dead = SIZE_MAX;  // the depth at which the walk has nothing left, if it has
    for (const std::uint32_t k : uncertain) {
      const std::string_view bytes = vocab.bytes(k);
      std::size_t common = 0;
      const std::size_t limit = std::min({previous.size(), bytes.size(), set_at.size() - 1});
      while (common < limit && previous[common] == bytes[common]) ++common;
      set_at.resize(common + 1);
      previous = bytes;
      if (dead != SIZE_MAX && dead > common) dead = SIZE_MAX;
      if (dead != SIZE_MAX) continue;
      for (std::size_t d = common; d < bytes.size(); ++d) {
        const PositionSetTable::Step step = sets.step(set_at.back(), static_cast<std::uint8_t>(bytes[d]));
        set_at.push_back(step.next);
        if (sets.empty(step.next) && !sets.ends(step.ends).grammar_ended) {
          dead = d + 1;
          break;
        }
      }
      if (dead == SIZE_MAX) set_bit(mask, vocab.id(k));
    }
  }
};

namespace {
std::shared_ptr<const CompiledGrammar> given(std::shared_ptr<const CompiledGrammar> grammar) {
  if (!grammar) throw std::invalid_argument("GrammarMatcher: no compiled grammar given");
  return grammar;
}
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : state_(std::make_unique<State>(given(std::move(grammar)))) {
  const ByteAutomaton& automaton = state_->grammar->automaton();
  StepEnds ends;
  state_->grammar->walker().arrive(automaton.rule_start[automaton.root_rule], StackPool::kRoot, state_->elements,
                                   state_->pool, ends);
  AutomatonWalker::dedupe(state_->elements, 0);
  state_->can_end = ends.grammar_ended;
}

GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::accept(std::int32_t token) {
  State& s = *state_;
  if (s.stopped) return false;
  const SortedVocabulary& vocab = s.vocabulary();
  if (vocab.is_stop(token)) {
    if (!s.can_end) return false;
    s.stopped = true;
    return true;
  }
  if (!vocab.is_producible(token)) return false;  // special, padding or empty
  const std::string_view bytes = vocab.id_bytes(token);
  s.walk.reset(s.elements, s.can_end);
  for (std::size_t d = 0; d < bytes.size(); ++d) {
    s.walk.push(s.grammar->walker(), static_cast<std::uint8_t>(bytes[d]), s.pool);
    if (!s.walk.alive(d + 1)) return false;
  }
  const auto reached = s.walk.at(bytes.size());
  s.elements.assign(reached.begin(), reached.end());
  s.can_end = s.walk.ends(bytes.size()).grammar_ended;
  s.compact();
  return true;
}

void GrammarMatcher::fill_bitmask(std::span<std::uint32_t> bitmask) {
  State& s = *state_;
  const SortedVocabulary& vocab = s.vocabulary();
  const std::size_t words = vocab.bitmask_words();
  if (bitmask.size() < words) {
    throw std::invalid_argument("GrammarMatcher::fill_bitmask: the bitmask has " + std::to_string(bitmask.size()) +
                                " words; the vocabulary of " + std::to_string(vocab.vocab_size()) + " tokens needs " +
                                std::to_string(words));
  }
  std::fill(bitmask.begin() + static_cast<std::ptrdiff_t>(words), bitmask.end(), 0u);
  if (s.stopped || s.elements.empty()) {
    std::fill(bitmask.begin(), bitmask.begin() + static_cast<std::ptrdiff_t>(words), 0u);
  } else {
    // Positions sorted by key are grouped by top node.
    std::vector<std::pair<std::size_t, std::size_t>> groups;
    for (std::size_t i = 0; i < s.elements.size();) {
      std::size_t j = i + 1;
      while (j < s.elements.size() && s.elements[j].node == s.elements[i].node) ++j;
      groups.emplace_back(i, j);
      i = j;
    }
    if (groups.size() == 1) {
      s.apply_cached(s.elements.front().node, bitmask, true);
    } else {
      std::fill(bitmask.begin(), bitmask.begin() + static_cast<std::ptrdiff_t>(words), 0u);
      for (const auto& [begin, end] : groups) s.apply_cached(s.elements[begin].node, bitmask, false);
    }
    const std::size_t frames = s.pool.size();
    for (const auto& [begin, end] : groups) {
      s.check_uncertain(std::span<const StackElement>(s.elements.data() + begin, end - begin), bitmask);
    }
    if (s.pool.size() > 4 * frames + 1024) s.compact();  // frames the walks interned
  }
  if (s.can_end) {
    for (const std::int32_t id : vocab.stop_ids()) set_bit(bitmask, id);
  }
}

bool GrammarMatcher::is_terminated() const {
  return state_->stopped || (state_->elements.empty() && state_->can_end);
}

bool GrammarMatcher::can_terminate() const {
  return state_->can_end;
}

}  // namespace engine::grammar
