#pragma once

// Small rules that refer to no other rule (a JSON string's character, whitespace) are copied into every
// place that refers to them before the automaton is built. A rule referred to from many places cannot be
// left into a known context, so the mask cache would keep nearly every token that ends it "uncertain" and
// check it against the real stack on every mask (a schema with strings of bounded length refers to its
// character rule once per counted position); inlined, those positions belong to the enclosing rule and
// their masks are precomputed whole.

#include "engine/grammar/grammar_ast.h"

namespace engine::grammar {

// Replaces references to leaf rules whose body is at most kMaxInlinedSize (an estimate of its automaton
// nodes) with copies of the body, repeatedly, so rules that become leaves are inlined in turn. The rules
// themselves stay (unreferenced ones are dropped when the automaton is built). A rule whose copies would
// add more than kMaxInlinedGrowth nodes in all (its size times the references the builder expands, a
// bounded repetition counting once per count) stays a rule: every added node with byte edges costs a
// walk of the vocabulary at compile time, and a JSON schema's string character, referenced once per
// position of every length-bounded string, would multiply the automaton.
inline constexpr std::size_t kMaxInlinedSize = 64;
inline constexpr std::size_t kMaxInlinedGrowth = 512;
void inline_small_rules(GrammarAst& ast);

}  // namespace engine::grammar
