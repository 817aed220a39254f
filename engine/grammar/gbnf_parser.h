#pragma once

// The GBNF parser: grammars as llama.cpp's --grammar and vLLM's `grammar` (xgrammar's EBNF) write them.
//
//   root  ::= item ("," item)*      # `root` is where matching starts; comments run to the line's end
//   item  ::= [a-z0-9_]+ | "\"" [^"\\]* "\"" | "x"{2,5} | .?
//
// Rule names use letters, digits, '-' and '_'. A rule's body may span lines: it ends where the next
// `name ::=` starts (on a new line) or at the end of the text. Literals and classes take the escapes \n \r
// \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH (classes also \- and \^); `.` is any character. Postfix operators:
// * + ? {m} {m,} {m,n}. Characters are code points; the automaton matches their UTF-8 bytes.

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/grammar/grammar_ast.h"

namespace engine::grammar {

// The largest count a repetition {m,n} may name: each repetition is expanded into copies of its body.
inline constexpr std::uint32_t kMaxRepetitionCount = 10000;

// Throws GrammarError naming the line and column (1-based, in characters) and what was expected: syntax
// errors, undefined or twice-defined rules, a missing `root`, reversed ranges, counts over the limit.
GrammarAst parse_gbnf(std::string_view text);

}  // namespace engine::grammar
