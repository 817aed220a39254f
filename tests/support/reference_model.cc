#include "tests/support/reference_model.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tests/support/environment.h"
#include "tests/support/temp_dir.h"

namespace testing_support {

namespace {

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the script with `args` and returns its output file's bytes.
std::vector<std::byte> run_reference(const std::string& args, const TempDir& dir) {
  const auto out = dir / "reference.out";
  const std::string command = shell_quoted(reference_python().string()) + " " +
                              shell_quoted(reference_model_script().string()) + " " + args + " --out " +
                              shell_quoted(out.string());
  std::string output;
  if (const int status = run_command(command, output); status != 0) {
    throw std::runtime_error("reference model failed (exit " + std::to_string(status) + "): " + command + "\n" +
                             output);
  }
  return read_file(out);
}

class Cursor {
 public:
  Cursor(const std::vector<std::byte>& bytes, std::string_view magic) : bytes_(bytes) {
    if (bytes.size() < magic.size() || std::memcmp(bytes.data(), magic.data(), magic.size()) != 0) {
      throw std::runtime_error("reference output does not start with " + std::string(magic));
    }
    at_ = magic.size();
  }
  template <typename T>
  T next() {
    if (at_ + sizeof(T) > bytes_.size()) throw std::runtime_error("reference output is truncated");
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  template <typename T>
  std::vector<T> array(std::size_t count) {
    if (count > (bytes_.size() - at_) / sizeof(T)) throw std::runtime_error("reference output is truncated");
    std::vector<T> out(count);
    std::memcpy(out.data(), bytes_.data() + at_, count * sizeof(T));
    at_ += count * sizeof(T);
    return out;
  }
  void expect_end() const {
    if (at_ != bytes_.size()) throw std::runtime_error("reference output has trailing bytes");
  }

 private:
  const std::vector<std::byte>& bytes_;
  std::size_t at_ = 0;
};

std::string token_list(const std::vector<std::int32_t>& ids) {
  std::string out;
  for (const auto id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace

const std::filesystem::path& reference_python() {
  static const std::filesystem::path path = env_or("REFERENCE_PYTHON", REFERENCE_PYTHON);
  return path;
}

const std::filesystem::path& reference_model_script() {
  static const std::filesystem::path path = env_or("REFERENCE_MODEL_SCRIPT", REFERENCE_MODEL_SCRIPT);
  return path;
}

namespace {

// The rows `command` ("logits" or "hidden") writes for every position of each sequence.
ReferenceLogits reference_rows(std::string_view command, const std::filesystem::path& model,
                               const std::vector<std::vector<std::int32_t>>& sequences, std::size_t max_model_len) {
  if (sequences.empty()) throw std::invalid_argument("the reference model needs at least one sequence");
  std::string tokens;
  for (const auto& sequence : sequences) tokens += (tokens.empty() ? "" : ";") + token_list(sequence);
  const TempDir dir;
  const auto bytes = run_reference(
      std::string(command) + " --model " + shell_quoted(model.string()) + " --tokens " + shell_quoted(tokens) +
          (max_model_len ? " --max-model-len " + std::to_string(max_model_len) : std::string()),
      dir);
  Cursor in(bytes, "RLOGITS1");
  const auto count = in.next<std::uint32_t>();
  ReferenceLogits result;
  result.vocab_size = in.next<std::uint32_t>();
  if (count != sequences.size()) throw std::runtime_error("reference output has the wrong number of sequences");
  const auto lengths = in.array<std::uint32_t>(count);
  for (const auto length : lengths) result.sequences.push_back(in.array<double>(length * result.vocab_size));
  in.expect_end();
  return result;
}

}  // namespace

ReferenceLogits reference_logits(const std::filesystem::path& model,
                                 const std::vector<std::vector<std::int32_t>>& sequences, std::size_t max_model_len) {
  return reference_rows("logits", model, sequences, max_model_len);
}

ReferenceLogits reference_hidden_states(const std::filesystem::path& model,
                                        const std::vector<std::vector<std::int32_t>>& sequences) {
  return reference_rows("hidden", model, sequences, 0);
}

std::vector<double> reference_embedding(const std::filesystem::path& model, const std::vector<std::int32_t>& tokens,
                                        engine::model::PoolingType type, std::size_t dimensions) {
  using engine::model::PoolingType;
  const auto hidden = reference_hidden_states(model, {tokens});
  const std::size_t size = dimensions != 0 ? dimensions : hidden.vocab_size;
  if (size > hidden.vocab_size || tokens.empty()) throw std::runtime_error("reference_embedding: nothing to pool");
  std::vector<double> v(size, 0.0);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const bool taken = type == PoolingType::Mean || (type == PoolingType::Last && t + 1 == tokens.size()) ||
                       (type == PoolingType::Cls && t == 0);
    if (!taken) continue;
    for (std::size_t i = 0; i < size; ++i) v[i] += hidden.row(0, t)[i];
  }
  double norm = 0;
  for (const double x : v) norm += x * x;
  for (auto& x : v) x /= std::sqrt(norm);
  return v;
}

std::vector<std::int32_t> reference_greedy(const std::filesystem::path& model, const std::vector<std::int32_t>& prompt,
                                           int steps) {
  const TempDir dir;
  const auto bytes = run_reference("greedy --model " + shell_quoted(model.string()) + " --tokens " +
                                       shell_quoted(token_list(prompt)) + " --steps " + std::to_string(steps),
                                   dir);
  Cursor in(bytes, "RGREEDY1");
  const auto ids = in.array<std::int64_t>(in.next<std::uint32_t>());
  in.expect_end();
  return {ids.begin(), ids.end()};
}

std::vector<double> reference_dequant(std::string_view type, std::span<const std::byte> blocks) {
  const TempDir dir;
  write_file(dir / "blocks.bin", blocks);
  const auto bytes = run_reference(
      "dequant --type " + shell_quoted(std::string(type)) + " --in " + shell_quoted((dir / "blocks.bin").string()),
      dir);
  Cursor in(bytes, "RDEQUAN1");
  auto values = in.array<double>(in.next<std::uint64_t>());
  in.expect_end();
  return values;
}

std::vector<std::byte> reference_quantize(std::string_view type, std::span<const float> values) {
  const TempDir dir;
  write_file(dir / "values.bin", std::as_bytes(values));
  const auto bytes = run_reference(
      "quantize --type " + shell_quoted(std::string(type)) + " --in " + shell_quoted((dir / "values.bin").string()),
      dir);
  Cursor in(bytes, "RQUANT01");
  auto blocks = in.array<std::byte>(in.next<std::uint64_t>());
  in.expect_end();
  return blocks;
}

}  // namespace testing_support
