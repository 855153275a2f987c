// SPDX-License-Identifier: MIT
// tokenizer.json pre-tokenizers are matched structurally against the ones the
// BPE splitter implements (core/tokenizer/bpe.cpp); the match gives the same
// name a GGUF file would carry in tokenizer.ggml.pre.
#include "core/tokenizer/tokenizer_hf.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tokenizer/tokenizer_internal.h"
#include "core/util/mapped_file.h"

namespace basalt {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json read_json(const fs::path& p) {
  const MappedFile f = MappedFile::map(p.string());
  try {
    return json::parse(f.data(), f.data() + f.size());
  } catch (const json::exception& e) {
    throw Error(p.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// The split regexes of the pre-tokenizers that HF writes as Split + ByteLevel.
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_type(const json& j, const char* type) { return j.is_object() && j.value("type", "") == type; }
bool byte_level(const json& j, bool use_regex) {
  return is_type(j, "ByteLevel") && j.value("use_regex", true) == use_regex && !j.value("add_prefix_space", false);
}
std::string split_regex(const json& j) {
  if (!is_type(j, "Split") || !j.contains("pattern") || !j["pattern"].is_object()) return "";
  const json& p = j["pattern"];
  return p.contains("Regex") && p["Regex"].is_string() ? p["Regex"].get<std::string>() : "";
}

// tokenizer.ggml.pre for this pre_tokenizer, or "" if none matches.
std::string pre_name(const json& pre) {
  if (byte_level(pre, true)) return "gpt2";
  if (!is_type(pre, "Sequence") || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) return "";
  const json& seq = pre["pretokenizers"];
  if (seq.size() == 2 && is_type(seq[0], "Digits") && seq[0].value("individual_digits", false) && byte_level(seq[1], true))
    return "smollm";
  if (seq.size() == 2 && byte_level(seq[1], false)) {
    const std::string re = split_regex(seq[0]);
    if (re == kLlama3Regex) return "llama-bpe";
    if (re == kQwen2Regex) return "qwen2";
  }
  return "";
}

// A pre_tokenizer no name fits, as split regexes in order: Split (a regex or a
// string, behavior Isolated: matches and gaps both kept), Digits and
// ByteLevel (its GPT-2 regex where use_regex), alone or in a Sequence. False
// for any other step.
bool pre_regexes(const json& pre, std::vector<std::string>& out) {
  static const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  auto step = [&](const json& j) {
    if (is_type(j, "ByteLevel")) {
      if (j.value("add_prefix_space", false)) return false;
      if (j.value("use_regex", true)) out.emplace_back(kGpt2Regex);
      return true;
    }
    if (is_type(j, "Digits")) {
      out.emplace_back(j.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
      return true;
    }
    if (!is_type(j, "Split") || j.value("behavior", "") != "Isolated" || j.value("invert", false) ||
        !j.contains("pattern") || !j["pattern"].is_object())
      return false;
    const json& p = j["pattern"];
    if (p.contains("Regex") && p["Regex"].is_string()) {
      out.push_back(p["Regex"].get<std::string>());
    } else if (p.contains("String") && p["String"].is_string() && !p["String"].get<std::string>().empty()) {
      out.push_back("\\Q" + p["String"].get<std::string>() + "\\E");  // literally
    } else {
      return false;
    }
    return true;
  };
  if (!is_type(pre, "Sequence")) return step(pre);
  if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) return false;
  for (const json& j : pre["pretokenizers"])
    if (!step(j)) return false;
  return !out.empty();
}

// The pre_tokenizer HF writes for a vocabulary's pre-tokenizer (the inverse
// of pre_name and pre_regexes): a name's own form, or its split regexes as
// Split steps.
json pre_tokenizer_json(const TokenizerData& d) {
  auto level = [](bool use_regex) {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
  };
  auto splits = [&](const std::vector<std::string>& regexes) {
    json steps = json::array();
    for (const std::string& re : regexes)
      steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back(level(false));
    return json{{"type", "Sequence"}, {"pretokenizers", steps}};
  };
  const std::string& pre = d.pre;
  if (!d.pre_regexes.empty()) return splits(d.pre_regexes);
  if (pre == "gpt2" || pre == "gpt-2" || pre == "default") return level(true);
  if (pre == "smollm")
    return json{{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, level(true)}}};
  if (pre == "llama-bpe") return splits({kLlama3Regex});
  if (pre == "qwen2") return splits({kQwen2Regex});
  if (const tokenizer_detail::BpePre* p = tokenizer_detail::find_bpe_pre(pre); p && p->split == tokenizer_detail::BpeSplit::regex)
    return splits(tokenizer_detail::bpe_pre_regexes(*p));
  throw Error("pre-tokenizer " + pre + " has no tokenizer.json form here (known: gpt2, smollm, llama-bpe, qwen2 and " +
              "the regex ones)");
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f.flush()) throw Error("cannot write " + p.string());
}

// Whether a SentencePiece-style tokenizer.json puts U+2581 before the text:
// the normalizer Prepend("\u2581") + Replace(" ", "\u2581") of Llama 2, or the
// Metaspace pre-tokenizer of later conversions (prepend_scheme first/always).
// Anything else is refused by name.
// A normalizer prefixes every stretch of text between added tokens (so does
// llama.cpp); Metaspace's "first" scheme only the text's start (first_only).
bool spm_space_prefix(const json& normalizer, const json& pre, const std::string& where, bool& first_only) {
  const std::string space = "\xe2\x96\x81";
  auto replace_space = [&](const json& n) {
    return is_type(n, "Replace") && n.contains("pattern") && n["pattern"].is_object() && n["pattern"].value("String", "") == " " &&
           n.value("content", "") == space;
  };
  auto prepend = [&](const json& n) { return is_type(n, "Prepend") && n.value("prepend", "") == space; };
  bool prefix = false, replaced = false;
  std::vector<json> steps;
  if (is_type(normalizer, "Sequence") && normalizer.contains("normalizers") && normalizer["normalizers"].is_array())
    steps = normalizer["normalizers"].get<std::vector<json>>();
  else if (!normalizer.is_null())
    steps.push_back(normalizer);
  for (const json& n : steps) {
    if (prepend(n) && !replaced) prefix = true;
    else if (replace_space(n)) replaced = true;
    else throw Error(where + ": SentencePiece-style normalizer not supported: " + n.dump() + " (supported: Prepend and Replace of U+2581)");
  }
  // Gemma's Split(" ") after a normalizer that left no space to split at (newer transformers write it).
  const bool split_nothing = replaced && is_type(pre, "Split") && pre.contains("pattern") && pre["pattern"].is_object() &&
                             pre["pattern"].value("String", "") == " " && !pre.value("invert", false);
  if (is_type(pre, "Metaspace") && pre.value("replacement", "") == space && !pre.value("split", false)) {
    replaced = true;
    const std::string scheme = pre.value("prepend_scheme", std::string("always"));
    prefix = scheme != "never" && pre.value("add_prefix_space", true);
    first_only = scheme == "first";
  } else if (!pre.is_null() && !split_nothing) {
    throw Error(where + ": SentencePiece-style pre-tokenizer not supported: " + pre.dump() +
                " (supported: Metaspace without split, Split(\" \") after the Replace normalizer)");
  }
  if (!replaced) throw Error(where + ": byte-fallback BPE without spaces mapped to U+2581 is not supported");
  return prefix;
}

// Scores for the SentencePiece encoder from BPE merges: a token scores minus the
// rank of the first merge that makes it, so the best-scoring pair is the
// lowest-ranked merge (HF's converter orders merges by the pieces' scores).
// Tokens <0xXX> are bytes, the model's unk_token unknown.
void spm_scores_from_merges(TokenizerData& d, const json& model, const std::string& where) {
  std::unordered_map<std::string, int32_t> id;
  for (size_t i = 0; i < d.tokens.size(); ++i) id.emplace(d.tokens[i], static_cast<int32_t>(i));
  d.scores.assign(d.tokens.size(), -1e9f);  // made by no merge: reached only as a single character
  for (size_t r = d.merges.size(); r-- > 0;) {
    const std::string& m = d.merges[r];
    const size_t sp = m.find(' ');
    auto it = id.find(m.substr(0, sp) + m.substr(sp + 1));
    if (it == id.end()) throw Error(where + ": merge \"" + m + "\" makes a token that is not in the vocabulary");
    d.scores[static_cast<size_t>(it->second)] = -static_cast<float>(r);
  }
  d.merges.clear();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const std::string& t = d.tokens[i];
    if (d.token_types[i] == static_cast<int32_t>(TokenType::normal) && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>')
      d.token_types[i] = static_cast<int32_t>(TokenType::byte);
  }
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  if (auto it = id.find(unk); !unk.empty() && it != id.end()) {
    d.unk_id = it->second;
    d.token_types[static_cast<size_t>(it->second)] = static_cast<int32_t>(TokenType::unknown);
  }
}

// A special token given as "text" or {"content": "text", ...}.
std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return "";
}

HfTokenizer read_tokenizer_files(const std::string& dir) {
  const fs::path folder(dir), tj = folder / "tokenizer.json";
  if (!fs::exists(tj)) throw Error(dir + ": no tokenizer.json");
  const std::string where = tj.string();
  const json t = read_json(tj);
  if (!t.is_object() || !t.contains("model") || !t["model"].is_object()) throw Error(where + ": no model object");
  const json& model = t["model"];
  if (model.value("type", "") != "BPE")
    throw Error(where + ": tokenizer model " + model.value("type", std::string("(none)")) + " is not supported (supported: BPE)");
  HfTokenizer out;
  TokenizerData& d = out.data;
  const json& pre = t.contains("pre_tokenizer") ? t["pre_tokenizer"] : json();
  const bool spm = model.value("byte_fallback", false);
  if (spm) {  // SentencePiece converted to BPE (Llama 2, Mistral, Gemma): the SentencePiece encoder with scores from the merges
    d.model = "llama";
    d.pre = "default";
    d.add_space_prefix = spm_space_prefix(t.contains("normalizer") ? t["normalizer"] : json(), pre, where, d.space_prefix_first_only);
  } else {
    d.model = "gpt2";
    d.pre = pre_name(pre);
    if (d.pre.empty() && !pre_regexes(pre, d.pre_regexes))
      throw Error(where + ": pre-tokenizer not supported: " + (pre.is_null() ? "none" : pre.dump()) +
                  " (supported: Split with behavior Isolated, Digits and ByteLevel steps; SentencePiece-style "
                  "byte-fallback BPE)");
  }

  // Vocabulary: ids 0..n-1, from the model's vocab and the added tokens.
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw Error(where + ": model.vocab is missing");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](const std::string& text, const json& id, int32_t type) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (1u << 24)) throw Error(where + ": token " + text + " has id " + id.dump());
    const size_t i = id.get<size_t>();
    if (i >= tokens.size()) tokens.resize(i + 1), types.resize(i + 1, -1);
    if (types[i] != -1 && tokens[i] != text) throw Error(where + ": id " + std::to_string(i) + " is both " + tokens[i] + " and " + text);
    tokens[i] = text;
    types[i] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) put(text, id, static_cast<int32_t>(TokenType::normal));
  if (t.contains("added_tokens") && t["added_tokens"].is_array())
    for (const json& a : t["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        throw Error(where + ": malformed added token " + a.dump());
      put(a["content"].get<std::string>(), a["id"],
          static_cast<int32_t>(a.value("special", false) ? TokenType::control : TokenType::user_defined));
    }
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] == -1) throw Error(where + ": no token has id " + std::to_string(i));
  d.tokens = std::move(tokens);
  d.token_types = std::move(types);

  if (model.contains("merges") && model["merges"].is_array())
    for (const json& m : model["merges"]) {
      if (m.is_string()) d.merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        d.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else throw Error(where + ": malformed merge " + m.dump());
    }
  if (spm) spm_scores_from_merges(d, model, where);

  // BOS/EOS and whether BOS is added: tokenizer_config.json, else the post-processor.
  auto find = [&](const std::string& text) -> int32_t {
    for (size_t i = 0; i < d.tokens.size(); ++i)
      if (d.tokens[i] == text) return static_cast<int32_t>(i);
    return -1;
  };
  const json& post = t.contains("post_processor") ? t["post_processor"] : json();
  if (is_type(post, "TemplateProcessing") && post.contains("single") && post["single"].is_array() && !post["single"].empty()) {
    const json& first = post["single"][0];
    if (first.is_object() && first.contains("SpecialToken")) {
      d.bos_id = find(first["SpecialToken"].value("id", ""));
      d.add_bos = d.bos_id >= 0;
    }
  }
  const fs::path tc = folder / "tokenizer_config.json";
  if (fs::exists(tc)) {
    const json c = read_json(tc);
    if (c.is_object()) {
      if (c.contains("bos_token")) d.bos_id = find(token_text(c["bos_token"]));
      if (c.contains("eos_token")) d.eos_id = find(token_text(c["eos_token"]));
      if (c.contains("unk_token")) d.unk_id = find(token_text(c["unk_token"]));
      if (c.contains("pad_token")) d.pad_id = find(token_text(c["pad_token"]));
      if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) d.add_bos = c["add_bos_token"].get<bool>();
      if (c.contains("add_eos_token") && c["add_eos_token"].is_boolean()) d.add_eos = c["add_eos_token"].get<bool>();
      if (c.contains("chat_template")) {
        const json& ct = c["chat_template"];
        if (ct.is_string()) out.chat_template = ct.get<std::string>();
        else if (ct.is_array())  // [{"name": "default", "template": ...}, ...]
          for (const json& e : ct)
            if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
              out.chat_template = e["template"].get<std::string>();
      }
    }
  }
  // Newer checkpoints keep the template in a file of its own: chat_template.jinja
  // (which transformers reads before tokenizer_config.json's), or a multimodal
  // model's processor file chat_template.json.
  if (const fs::path jinja = folder / "chat_template.jinja"; fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw Error(jinja.string() + ": cannot read");
    out.chat_template = text.str();
  } else if (const fs::path processor = folder / "chat_template.json"; out.chat_template.empty() && fs::exists(processor)) {
    const json c = read_json(processor);
    if (c.is_object() && c.contains("chat_template") && c["chat_template"].is_string())
      out.chat_template = c["chat_template"].get<std::string>();
  }
  if (d.add_bos && d.bos_id < 0) d.add_bos = false;
  // generation_config.json may name more end-of-generation ids (Llama 3: <|eot_id|>).
  const fs::path gc = folder / "generation_config.json";
  if (fs::exists(gc)) {
    const json g = read_json(gc);
    const json e = g.is_object() && g.contains("eos_token_id") ? g["eos_token_id"] : json();
    std::vector<int64_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
    if (e.is_array())
      for (const json& x : e)
        if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
    const int64_t n = static_cast<int64_t>(d.tokens.size());
    for (int64_t id : ids) {
      if (id < 0 || id >= n || id == d.eos_id) continue;
      if (d.eos_id < 0) d.eos_id = static_cast<int32_t>(id);
      else if (d.eot_id < 0) d.eot_id = static_cast<int32_t>(id);
      else if (d.eom_id < 0) d.eom_id = static_cast<int32_t>(id);
    }
  }
  return out;
}

}  // namespace

HfTokenizer load_tokenizer_hf(const std::string& dir) {
  try {
    return read_tokenizer_files(dir);
  } catch (const json::exception& e) {  // a field of the wrong type: nlohmann's value() and get() throw these
    throw Error(dir + ": a field of tokenizer.json, tokenizer_config.json or generation_config.json has the wrong type (" +
                e.what() + ")");
  }
}

namespace {

// BPE merges for a SentencePiece vocabulary, as transformers' converter makes
// them: every split of a piece into two pieces, ordered by the piece's score
// (best first), then by the halves' ids. spm_scores_from_merges inverts it.
json spm_merges(const TokenizerData& d) {
  std::unordered_map<std::string_view, int32_t> id;
  for (size_t i = 0; i < d.tokens.size(); ++i) id.emplace(d.tokens[i], static_cast<int32_t>(i));
  struct Merge {
    float score;
    int32_t left, right;
  };
  std::vector<Merge> all;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    const std::string_view t = d.tokens[i];
    const size_t first = all.size();
    for (size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<uint8_t>(t[k]) & 0xC0) == 0x80) continue;  // split between characters only
      auto l = id.find(t.substr(0, k)), r = id.find(t.substr(k));
      if (l != id.end() && r != id.end()) all.push_back({d.scores.empty() ? 0.0f : d.scores[i], l->second, r->second});
    }
    std::sort(all.begin() + static_cast<std::ptrdiff_t>(first), all.end(),
              [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
  }
  std::stable_sort(all.begin(), all.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merges = json::array();
  for (const Merge& m : all) merges.push_back({d.tokens[static_cast<size_t>(m.left)], d.tokens[static_cast<size_t>(m.right)]});
  return merges;
}

}  // namespace

void write_tokenizer_hf(const TokenizerData& d, const std::string& chat_template, const std::string& dir) {
  const bool spm = d.model == "llama";
  if (!spm && d.model != "gpt2") throw Error("writing a " + d.model + " vocabulary as tokenizer.json is not supported");
  const fs::path folder(dir);
  json vocab = json::object(), merges = json::array(), added = json::array();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    vocab[d.tokens[i]] = i;
    const auto type = i < d.token_types.size() ? static_cast<TokenType>(d.token_types[i]) : TokenType::normal;
    if (type == TokenType::control || type == TokenType::user_defined)
      added.push_back({{"id", i}, {"content", d.tokens[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == TokenType::control}});
  }
  if (spm) {
    merges = spm_merges(d);
  } else {
    for (const std::string& m : d.merges) {
      const size_t space = m.find(' ');
      if (space == std::string::npos) throw Error("malformed BPE merge \"" + m + "\"");
      merges.push_back({m.substr(0, space), m.substr(space + 1)});
    }
  }
  json post = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  if (spm) post = nullptr;
  if (d.add_bos && d.bos_id >= 0) {  // BOS before the text, as tokenizer_config.json's add_bos_token says
    const std::string bos = d.tokens[static_cast<size_t>(d.bos_id)];
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                      {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
            {"special_tokens", {{bos, {{"id", bos}, {"ids", {d.bos_id}}, {"tokens", {bos}}}}}}};
  }
  json normalizer = nullptr, pre = nullptr, decoder;
  if (spm) {  // as transformers converts SentencePiece models: spaces as U+2581, byte fallback
    const std::string space = "\xe2\x96\x81";
    const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
    if (d.add_space_prefix && d.space_prefix_first_only)
      pre = {{"type", "Metaspace"}, {"replacement", space}, {"prepend_scheme", "first"}, {"split", false}};
    else if (d.add_space_prefix)
      normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", space}}, replace}}};
    else
      normalizer = replace;
    json steps = {{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}}, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (d.add_space_prefix) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    decoder = {{"type", "Sequence"}, {"decoders", steps}};
  } else {
    pre = pre_tokenizer_json(d);
    decoder = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  }
  const bool has_unk = spm && d.unk_id >= 0 && d.unk_id < static_cast<int32_t>(d.tokens.size());
  const json tokenizer = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}, {"normalizer", normalizer},
      {"pre_tokenizer", pre}, {"post_processor", post}, {"decoder", decoder},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", has_unk ? json(d.tokens[static_cast<size_t>(d.unk_id)]) : json()},
        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", spm}, {"byte_fallback", spm},
        {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}}};
  write_text(folder / "tokenizer.json", tokenizer.dump());

  auto token = [&](int32_t id) { return id >= 0 && id < static_cast<int32_t>(d.tokens.size()) ? json(d.tokens[static_cast<size_t>(id)]) : json(); };
  json config = {{"tokenizer_class", spm ? "LlamaTokenizerFast" : "GPT2Tokenizer"}, {"add_bos_token", d.add_bos}, {"add_eos_token", d.add_eos},
                 {"bos_token", token(d.bos_id)}, {"eos_token", token(d.eos_id)}, {"unk_token", token(d.unk_id)},
                 {"pad_token", token(d.pad_id)}};
  if (!chat_template.empty()) config["chat_template"] = chat_template;
  write_text(folder / "tokenizer_config.json", config.dump(2));
  json eos = json::array();
  for (int32_t id : {d.eos_id, d.eot_id, d.eom_id})
    if (id >= 0) eos.push_back(id);
  const json generation = {{"bos_token_id", d.bos_id >= 0 ? json(d.bos_id) : json()},
                           {"eos_token_id", eos.size() == 1 ? eos[0] : eos}};
  write_text(folder / "generation_config.json", generation.dump(2));
}

}  // namespace basalt
