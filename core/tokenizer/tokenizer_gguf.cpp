// SPDX-License-Identifier: MIT
#include "core/tokenizer/tokenizer_gguf.h"

#include "core/error.h"
#include "core/tokenizer/tokenizer_internal.h"

namespace basalt {

TokenizerData load_tokenizer_data(const GgufFile& f) {
  TokenizerData d;
  std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) throw Error(f.path() + ": no vocabulary (metadata key tokenizer.ggml.model is missing)");
  d.model = *model;
  d.pre = f.get_string("tokenizer.ggml.pre").value_or("");
  d.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (d.tokens.empty()) throw Error(f.path() + ": metadata key tokenizer.ggml.tokens is missing or empty");
  d.scores = f.get_float_array("tokenizer.ggml.scores");
  for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) d.token_types.push_back(static_cast<int32_t>(t));
  d.merges = f.get_string_array("tokenizer.ggml.merges");

  // Defaults of llama.cpp (llama_vocab::impl::load).
  if (d.model == "llama") {
    d.bos_id = 1, d.eos_id = 2, d.unk_id = 0;
    d.add_bos = true;
    d.add_space_prefix = true;
  } else if (d.model == "gpt2" || d.model == "gemma4" || d.model == "whitespace") {
    // llama.cpp's other BPE kinds come with their own pre-tokenizer, whatever tokenizer.ggml.pre says.
    if (d.model != "gpt2") d.pre = d.model;
    if (d.pre.empty()) d.pre = "default";
    const tokenizer_detail::BpePre* pre = tokenizer_detail::find_bpe_pre(d.pre);
    if (!pre)
      throw Error(f.path() + ": unknown pre-tokenizer '" + d.pre + "' (tokenizer.ggml.pre); supported: " +
                  tokenizer_detail::bpe_pre_names());
    if (d.model == "gpt2") d.bos_id = 11, d.eos_id = 11;
    d.add_bos = pre->add_bos;
    d.model = "gpt2";
    if (f.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(false))
      throw Error(f.path() + ": tokenizer.ggml.normalizer.lowercase is set; lowercasing BPE vocabularies is not supported");
  } else {
    throw Error(f.path() + ": unknown tokenizer model '" + d.model + "' (tokenizer.ggml.model); supported: gpt2, gemma4, whitespace, llama");
  }

  const int64_t n = static_cast<int64_t>(d.tokens.size());
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &d.bos_id},     {"tokenizer.ggml.eos_token_id", &d.eos_id},
      {"tokenizer.ggml.eot_token_id", &d.eot_id},     {"tokenizer.ggml.eom_token_id", &d.eom_id},
      {"tokenizer.ggml.unknown_token_id", &d.unk_id}, {"tokenizer.ggml.padding_token_id", &d.pad_id},
  };
  for (auto [key, id] : ids) {
    if (*id >= n) *id = -1;  // a default the vocabulary is too small for
    std::optional<int64_t> v = f.get_int(key);
    if (v && *v >= 0 && *v < n) *id = static_cast<int32_t>(*v);  // else: keep the default, as llama.cpp does
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) d.add_bos = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) d.add_eos = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) d.add_space_prefix = *v;
  return d;
}

}  // namespace basalt
