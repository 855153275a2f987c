// SPDX-License-Identifier: MIT
// GPT-2 style byte-level BPE: split text into words with the model's
// pre-tokenizer regex, map each byte to a printable character, then merge
// adjacent symbols by merge rank (lowest first, leftmost on ties), as
// llama.cpp's llm_tokenizer_bpe does, so token ids match it exactly.
#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/tokenizer/tokenizer_internal.h"

namespace basalt::tokenizer_detail {

// ---- pre-tokenizer names ----------------------------------------------------

namespace {

// The regexes below that llama.cpp runs as code of its own (src/unicode.cpp),
// written so that PCRE2 splits the same way.

// gpt2's split (unicode_regex_split_custom_gpt2).
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Digits in groups of three from the right (afmoe, tiny_aya: unicode_regex_split_custom_afmoe).
// That code also joins the text before a run of digits to the run's first
// group; the regex does the same, and starts only at a word's start or after
// a digit, so that text without digits costs linear time.
constexpr const char* kDigitGroups = "(?:^|(?<=\\p{N}))\\P{N}*+\\p{N}{1,3}(?=(?:\\p{N}{3})*+(?!\\p{N}))";
// Kimi K2 (unicode_regex_split_custom_kimi_k2): llama3's split with Han
// ideographs (llama.cpp's unicode_cpt_is_han ranges) as words of their own.
#define BASALT_HAN "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}"
constexpr const char* kKimiK2 =
    "[" BASALT_HAN "]+|[^\\r\\n\\p{L}\\p{N}]?(?:(?![" BASALT_HAN "])\\p{L})+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
#undef BASALT_HAN

// tokenizer.ggml.pre -> split rules, following llama.cpp's llama_vocab::impl::load:
// hand-written splitters for the common families (faster), regexes for the rest.
constexpr BpePre kBpePres[] = {
    {"default", BpeSplit::default_bpe, false, false},
    {"gpt2", BpeSplit::gpt2, false, false},
    {"gpt-2", BpeSplit::gpt2, false, false},
    {"phi-2", BpeSplit::gpt2, false, false},
    {"mpt", BpeSplit::gpt2, false, false},
    {"olmo", BpeSplit::gpt2, false, false},
    {"jais", BpeSplit::gpt2, false, false},
    {"smollm", BpeSplit::digits_gpt2, false, false},
    {"starcoder", BpeSplit::digits_gpt2, false, false},
    {"refact", BpeSplit::digits_gpt2, false, false},
    {"command-r", BpeSplit::digits_gpt2, false, false},
    {"codeshell", BpeSplit::digits_gpt2, false, false},
    {"exaone", BpeSplit::digits_gpt2, false, false},
    {"minerva-7b", BpeSplit::digits_gpt2, false, false},
    {"llama3", BpeSplit::llama3, true, true},
    {"llama-v3", BpeSplit::llama3, true, true},
    {"llama-bpe", BpeSplit::llama3, true, true},
    {"falcon3", BpeSplit::llama3, true, true},
    {"pixtral", BpeSplit::llama3, true, true},
    {"dbrx", BpeSplit::llama3, false, false},
    {"smaug-bpe", BpeSplit::llama3, false, false},
    {"qwen2", BpeSplit::qwen2, false, false},
    {"deepseek-r1-qwen", BpeSplit::qwen2, false, false},
    {"stablelm2", BpeSplit::qwen2, false, false},
    {"megrez", BpeSplit::qwen2, false, false},
    {"a.x-4.0", BpeSplit::gpt2, false, false},
    {"exaone4", BpeSplit::gpt2, false, false},
    {"gigachat", BpeSplit::gpt2, false, false},
    {"mellum", BpeSplit::gpt2, false, false},
    {"trillion", BpeSplit::gpt2, false, false},
    {"falcon-h1", BpeSplit::llama3, true, true},
    {"jina-v5-nano", BpeSplit::llama3, true, true},
    {"lfm2", BpeSplit::llama3, true, true},
    {"midm-2.0", BpeSplit::llama3, true, true},
    {"f2llmv2", BpeSplit::qwen2, false, false},
    {"kormo", BpeSplit::qwen2, false, false},
    {"glm5", BpeSplit::llama3, true, false},
    {"hunyuan", BpeSplit::qwen2, false, false},
    {"solar-open", BpeSplit::qwen2, false, false},
    {"grok-2", BpeSplit::qwen2, false, false},
    {"mellum2", BpeSplit::digits_gpt2, false, false},
    {"granite-docling", BpeSplit::gpt2, false, false},
    // Encoders (BERT-like embedding models): the gpt2 split; their SEP token
    // is added by the embedding code, not by tokenization.
    {"jina-es", BpeSplit::gpt2, false, false},
    {"jina-de", BpeSplit::gpt2, false, false},
    {"jina-v1-en", BpeSplit::gpt2, false, false},
    {"jina-v2-es", BpeSplit::gpt2, false, false},
    {"jina-v2-de", BpeSplit::gpt2, false, false},
    {"jina-v2-code", BpeSplit::gpt2, false, false},
    {"roberta-bpe", BpeSplit::gpt2, false, false},
    {"modern-bert", BpeSplit::gpt2, false, false},
    // The rest as data: llama.cpp's split regexes for each name, run by PCRE2.
    {"deepseek-llm", BpeSplit::regex, false, false, {"[\r\n]", "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+", "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    {"deepseek-coder", BpeSplit::regex, false, false, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"deepseek-v3", BpeSplit::regex, false, false, {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", BpeSplit::regex, false, false, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", "[0-9][0-9][0-9]"}},
    {"gpt-4o", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"tekken", BpeSplit::regex, true, true, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"chatglm-bpe", BpeSplit::regex, false, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"glm4", BpeSplit::regex, true, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"viking", BpeSplit::regex, false, false, {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"}},
    {"bloom", BpeSplit::regex, false, false, {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"poro-chat", BpeSplit::regex, false, false, {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"gpt3-finnish", BpeSplit::regex, false, false, {" ?[^(\\s|.,!?…。，、।۔،)]+"}},
    {"seed-coder", BpeSplit::regex, false, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe", BpeSplit::regex, false, false, {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe2", BpeSplit::regex, false, false, {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"qwen35", BpeSplit::regex, false, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"jais-2", BpeSplit::regex, false, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    {"llada-moe", BpeSplit::regex, false, false, {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"kanana2", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"llama4", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"talkie", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"minimax-m2", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"hunyuan-dense", BpeSplit::regex, false, false, {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"joyai-llm", BpeSplit::regex, false, false, {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"hy_v4", BpeSplit::regex, false, false, {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"youtu", BpeSplit::regex, true, false, {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"spark2_5", BpeSplit::regex, false, false, {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+", "\\p{N}"}},
    {"tiny_aya", BpeSplit::regex, false, false, {kDigitGroups, "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"cohere2moe", BpeSplit::regex, false, false, {kDigitGroups, "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"laguna", BpeSplit::regex, false, false, {"[^\\n]+|[\\n]+", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"ufakzeka", BpeSplit::regex, false, false, {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"exaone-moe", BpeSplit::regex, false, false, {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"granite-embed-multi-97m", BpeSplit::regex, true, false, {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"minicpm5", BpeSplit::regex, true, false, {"\\p{N}{1,3}", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"superbpe", BpeSplit::regex, false, false, {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}},
    {"chameleon", BpeSplit::regex, false, true, {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2}},
    {"afmoe", BpeSplit::regex, false, false, {kDigitGroups, "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"kimi-k2", BpeSplit::regex, false, false, {kKimiK2}},
    // SentencePiece-style BPE on raw UTF-8: spaces become U+2581, only newlines split.
    {"gemma4", BpeSplit::regex, false, false, {"[^\\n]+|[\\n]+"}, BpeSymbols::utf8, true, true, true},
    {"granite-embed-multi-311m", BpeSplit::regex, false, false, {"[^\\n]+|[\\n]+"}, BpeSymbols::utf8, true, true, true},
    {"sarvam-moe", BpeSplit::regex, false, false, {"[^\\n]+|[\\n]+"}, BpeSymbols::utf8, true, false},
    {"whitespace", BpeSplit::words, false, false, {}, BpeSymbols::utf8},
};
}  // namespace

const BpePre* find_bpe_pre(std::string_view name) {
  for (const auto& p : kBpePres)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> bpe_pre_regexes(const BpePre& pre) {
  std::vector<std::string> regexes;
  for (const char* re : pre.regexes)
    if (re) regexes.emplace_back(re);
  return regexes;
}

std::string bpe_pre_names() {
  std::string s;
  for (const auto& p : kBpePres) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

// ---- splitting ----------------------------------------------------------------

namespace {

struct Char {
  uint32_t cp;
  CharClass cls;
  uint32_t off;  // byte offset in the text
};

// A run of chars [begin, end) that later passes may split further.
struct Span {
  uint32_t begin, end;
};

bool is_rn(uint32_t cp) { return cp == '\r' || cp == '\n'; }
// [^\s\p{L}\p{N}]
bool is_other(CharClass c) { return c != CharClass::letter && c != CharClass::number && c != CharClass::space; }
uint32_t ascii_lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

class Splitter {
 public:
  explicit Splitter(std::string_view text) {
    chars_.reserve(text.size() + 1);
    for (size_t pos = 0; pos < text.size();) {
      Utf8Char c = utf8_next(text, pos);
      chars_.push_back({c.cp, char_class(c.cp), static_cast<uint32_t>(pos)});
      pos += c.len;
    }
    chars_.push_back({0, CharClass::other, static_cast<uint32_t>(text.size())});  // sentinel
    spans_.push_back({0, static_cast<uint32_t>(chars_.size() - 1)});
  }

  void words(std::string_view text, std::vector<std::string_view>& out) const {
    for (const Span& s : spans_)
      out.push_back(text.substr(chars_[s.begin].off, chars_[s.end].off - chars_[s.begin].off));
  }

  // Regex-split semantics of llama.cpp (unicode_regex_split_stl): within each
  // span, every match of `match` (length at a position, 0 for none; tried
  // left to right) becomes a span, and so does each stretch between matches.
  template <class Match>
  void isolate(Match match) {
    std::vector<Span> next;
    next.reserve(spans_.size() * 2);
    for (const Span& s : spans_) {
      uint32_t gap = s.begin;
      for (uint32_t pos = s.begin; pos < s.end;) {
        uint32_t n = match(pos, s.end);
        if (n == 0) {
          ++pos;
          continue;
        }
        if (pos > gap) next.push_back({gap, pos});
        next.push_back({pos, pos + n});
        pos += n;
        gap = pos;
      }
      if (gap < s.end) next.push_back({gap, s.end});
    }
    spans_ = std::move(next);
  }

  // Every span is cut into consecutive pieces; `piece` gives the length of
  // the piece at a position (at least 1).
  template <class Piece>
  void cut(Piece piece) {
    std::vector<Span> next;
    next.reserve(spans_.size() * 2);
    for (const Span& s : spans_) {
      for (uint32_t pos = s.begin; pos < s.end;) {
        uint32_t n = piece(pos, s.end);
        next.push_back({pos, pos + n});
        pos += n;
      }
    }
    spans_ = std::move(next);
  }

  CharClass cls(uint32_t i) const { return chars_[i].cls; }
  uint32_t cp(uint32_t i) const { return chars_[i].cp; }

  // Length of the run from pos (< end) of chars whose class satisfies pred.
  template <class Pred>
  uint32_t run(uint32_t pos, uint32_t end, Pred pred) const {
    uint32_t i = pos;
    while (i < end && pred(chars_[i].cls)) ++i;
    return i - pos;
  }

  // 's|'t|'re|'ve|'m|'ll|'d at pos: its length, or 0.
  uint32_t contraction(uint32_t pos, uint32_t end, bool any_case) const {
    if (cp(pos) != '\'' || pos + 1 >= end) return 0;
    auto lower = [&](uint32_t i) { return any_case ? ascii_lower(cp(i)) : cp(i); };
    uint32_t a = lower(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end) return 0;
    uint32_t b = lower(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  // A lone whitespace character the regex does not match is a piece of its own.
  uint32_t gpt2_piece(uint32_t pos, uint32_t end) const {
    if (uint32_t n = contraction(pos, end, false)) return n;
    uint32_t q = (cp(pos) == ' ' && pos + 1 < end) ? pos + 1 : pos;
    CharClass c = cls(q);
    if (c == CharClass::letter) return q - pos + run(q, end, [](CharClass k) { return k == CharClass::letter; });
    if (c == CharClass::number) return q - pos + run(q, end, [](CharClass k) { return k == CharClass::number; });
    if (is_other(c)) return q - pos + run(q, end, is_other);
    return whitespace_piece(pos, end);
  }

  // \s+(?!\S)|\s+ : a run of whitespace before a non-space keeps its last
  // character for the next piece.
  uint32_t whitespace_piece(uint32_t pos, uint32_t end) const {
    uint32_t n = run(pos, end, [](CharClass k) { return k == CharClass::space; });
    if (n > 1 && pos + n < end) return n - 1;
    return std::max<uint32_t>(n, 1);
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  uint32_t llama3_piece(uint32_t pos, uint32_t end, uint32_t max_digits) const {
    if (uint32_t n = contraction(pos, end, true)) return n;
    CharClass c = cls(pos);
    auto letters = [&](uint32_t from) { return run(from, end, [](CharClass k) { return k == CharClass::letter; }); };
    if (c == CharClass::letter) return letters(pos);
    if (!is_rn(cp(pos)) && c != CharClass::number && pos + 1 < end && cls(pos + 1) == CharClass::letter)
      return 1 + letters(pos + 1);
    if (c == CharClass::number)
      return std::min(max_digits, run(pos, end, [](CharClass k) { return k == CharClass::number; }));
    uint32_t q = (cp(pos) == ' ' && pos + 1 < end) ? pos + 1 : pos;
    if (is_other(cls(q))) {
      uint32_t i = q + run(q, end, is_other);
      while (i < end && is_rn(cp(i))) ++i;
      return i - pos;
    }
    // \s*[\r\n]+ : through the last \r or \n of the whitespace run.
    uint32_t n = run(pos, end, [](CharClass k) { return k == CharClass::space; });
    for (uint32_t i = n; i > 0; --i)
      if (is_rn(cp(pos + i - 1))) return i;
    return whitespace_piece(pos, end);
  }

 private:
  std::vector<Char> chars_;
  std::vector<Span> spans_;
};

}  // namespace

void bpe_split_words(BpeSplit split, std::string_view text, std::vector<std::string_view>& words) {
  if (text.empty()) return;
  Splitter s(text);
  auto gpt2 = [&](uint32_t pos, uint32_t end) { return s.gpt2_piece(pos, end); };
  switch (split) {
    case BpeSplit::gpt2:
      s.cut(gpt2);
      break;
    case BpeSplit::digits_gpt2:
      s.isolate([&](uint32_t pos, uint32_t) { return s.cls(pos) == CharClass::number ? 1u : 0u; });
      s.cut(gpt2);
      break;
    case BpeSplit::llama3:
      s.cut([&](uint32_t pos, uint32_t end) { return s.llama3_piece(pos, end, 3); });
      break;
    case BpeSplit::qwen2:
      s.cut([&](uint32_t pos, uint32_t end) { return s.llama3_piece(pos, end, 1); });
      break;
    case BpeSplit::regex: throw Error("internal: regex pre-tokenizers split through RegexSplitter");
    case BpeSplit::words: {
      s.cut([&](uint32_t pos, uint32_t end) {
        const bool space = s.cls(pos) == CharClass::space;
        return s.run(pos, end, [space](CharClass k) { return (k == CharClass::space) == space; });
      });
      const auto first = static_cast<std::ptrdiff_t>(words.size());
      s.words(text, words);
      words.erase(std::remove_if(words.begin() + first, words.end(),
                                 [](std::string_view w) { return char_class(utf8_next(w, 0).cp) == CharClass::space; }),
                  words.end());
      return;
    }
    case BpeSplit::default_bpe: {
      // [\p{P}\$\+<=>\^~\|]+
      auto punct = [&](uint32_t i) {
        uint32_t c = s.cp(i);
        return s.cls(i) == CharClass::punct || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
               c == '~' || c == '|';
      };
      s.isolate([&](uint32_t pos, uint32_t end) {
        uint32_t i = pos;
        while (i < end && punct(i)) ++i;
        return i - pos;
      });
      s.cut(gpt2);
      s.isolate([&](uint32_t pos, uint32_t end) {  // \p{N}+
        return s.run(pos, end, [](CharClass k) { return k == CharClass::number; });
      });
      s.isolate([&](uint32_t pos, uint32_t end) {  // [0-9][0-9][0-9]
        auto digit = [&](uint32_t i) { return s.cp(i) >= '0' && s.cp(i) <= '9'; };
        return pos + 3 <= end && digit(pos) && digit(pos + 1) && digit(pos + 2) ? 3u : 0u;
      });
      break;
    }
  }
  s.words(text, words);
}

// ---- byte-level BPE -------------------------------------------------------------

namespace {

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others
// for U+0100 onwards in byte order.
uint32_t byte_to_char(uint8_t b) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (uint32_t c = 0; c < 256; ++c) {
      bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
      t[c] = printable ? c : 256 + n++;
    }
    return t;
  }();
  return table[b];
}

// SentencePiece's name for a byte token: "<0x0A>".
std::string byte_token_text(uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
}

std::string bytes_to_chars(std::string_view raw) {
  std::string s;
  s.reserve(raw.size() * 2);
  for (char ch : raw) utf8_append(s, byte_to_char(static_cast<uint8_t>(ch)));
  return s;
}

}  // namespace

BpeEncoder::BpeEncoder(const TokenizerData& data, const TokenMap& tokens, const BpePre& pre)
    : pre_(pre), tokens_(tokens), n_vocab_(static_cast<int32_t>(data.tokens.size())) {
  if (pre.split == BpeSplit::regex)  // a tokenizer.json's own regexes, else the named pre-tokenizer's
    regex_ = std::make_shared<const RegexSplitter>(!data.pre_regexes.empty() ? data.pre_regexes : bpe_pre_regexes(pre));
  const bool utf8 = pre.symbols == BpeSymbols::utf8;
  bytes_of_char_.assign(256 + 256, -1);
  for (int b = 0; b < 256; ++b) {
    bytes_of_char_[byte_to_char(static_cast<uint8_t>(b))] = b;
    byte_token_[b] = lookup(tokens_, utf8 ? byte_token_text(static_cast<uint8_t>(b)) : bytes_to_chars(std::string(1, static_cast<char>(b))));
  }
  merges_.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& m = data.merges[rank];
    size_t space = m.find(' ', 1);
    if (space == std::string::npos)
      throw Error("tokenizer.ggml.merges[" + std::to_string(rank) + "] \"" + m + "\" is not two pieces separated by a space");
    std::string left = m.substr(0, space), right = m.substr(space + 1);
    uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(symbol_id(left))) << 32 |
                   static_cast<uint32_t>(symbol_id(right));
    merges_.emplace(key, Merge{static_cast<int32_t>(rank), symbol_id(left + right)});  // first rank wins
  }
  for (int b = 0; b < 256; ++b) {
    byte_symbol_[b] = utf8 ? -1 : byte_token_[b];
    if (!utf8 && byte_symbol_[b] < 0) byte_symbol_[b] = lookup(extra_symbols_, bytes_to_chars(std::string(1, static_cast<char>(b))));
  }
  if (pre_.ignore_merges && !utf8) {
    // Keyed by raw bytes; only tokens made of mapped characters can equal a
    // byte-mapped word, and for those the mapping is one to one.
    raw_tokens_.reserve(data.tokens.size());
    for (size_t id = 0; id < data.tokens.size(); ++id) {
      const std::string& t = data.tokens[id];
      bool mapped = true;
      for (size_t pos = 0; pos < t.size() && mapped;) {
        Utf8Char c = utf8_next(t, pos);
        mapped = c.cp < bytes_of_char_.size() && bytes_of_char_[c.cp] >= 0;
        pos += c.len;
      }
      if (mapped) raw_tokens_.emplace(token_bytes(t), static_cast<int32_t>(id));
    }
  }
}

// A token's id, or an id past the vocabulary for a merge piece that is not one.
int32_t BpeEncoder::symbol_id(const std::string& byte_text) {
  int32_t id = lookup(tokens_, byte_text);
  if (id >= 0) return id;
  auto [it, added] = extra_symbols_.emplace(byte_text, n_vocab_ + static_cast<int32_t>(extra_symbols_.size()));
  return it->second;
}

std::string BpeEncoder::token_bytes(std::string_view token_text) const {
  if (pre_.symbols == BpeSymbols::utf8) return pre_.escape_spaces ? unescape_spaces(token_text) : std::string(token_text);
  std::string out;
  out.reserve(token_text.size());
  for (size_t pos = 0; pos < token_text.size();) {
    Utf8Char c = utf8_next(token_text, pos);
    if (c.cp < bytes_of_char_.size() && bytes_of_char_[c.cp] >= 0)
      out += static_cast<char>(bytes_of_char_[c.cp]);
    else
      out.append(token_text.substr(pos, c.len));  // not a mapped byte: keep the character
    pos += c.len;
  }
  return out;
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::string escaped;
  if (pre_.escape_spaces) {
    escaped.reserve(text.size() + text.size() / 4);
    for (char c : text) {
      if (c == ' ') escaped += kSpaceMark;
      else escaped += c;
    }
    text = escaped;
  }
  std::vector<std::string_view> words;
  if (regex_) regex_->split(text, words);
  else bpe_split_words(pre_.split, text, words);
  for (std::string_view w : words) encode_word(w, out);
}

namespace {
struct Symbol {
  int32_t id;          // token or extra symbol
  int32_t prev, next;  // neighbours in the word, -1 at the ends
  uint32_t start, len;  // raw bytes of the word; len 0 once merged away
};
struct Bigram {
  int32_t rank;
  int32_t left, right;  // symbol indices
  int32_t left_id, right_id, result;
};
// Heap order: lowest rank on top, then leftmost.
bool bigram_after(const Bigram& a, const Bigram& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); }
}  // namespace

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const bool utf8 = pre_.symbols == BpeSymbols::utf8;
  if (pre_.ignore_merges ||
      (pre_.whole_newlines && !word.empty() && word.find_first_not_of('\n') == std::string_view::npos)) {
    int32_t id = lookup(utf8 ? tokens_ : raw_tokens_, word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Bigram> heap;
  sym.clear();
  heap.clear();
  // One symbol per byte, or per UTF-8 character (a token, a merge piece, or -1).
  for (uint32_t pos = 0; pos < word.size();) {
    uint32_t len = 1;
    int32_t id;
    if (utf8) {
      len = utf8_next(word, pos).len;
      std::string_view ch = word.substr(pos, len);
      id = lookup(tokens_, ch);
      if (id < 0) id = lookup(extra_symbols_, ch);
    } else {
      id = byte_symbol_[static_cast<uint8_t>(word[pos])];
    }
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, -1, pos, len});
    if (i > 0) sym[i - 1].next = i;
    pos += len;
  }
  const int32_t n = static_cast<int32_t>(sym.size());
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
    uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(sym[left].id)) << 32 | static_cast<uint32_t>(sym[right].id);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, right, sym[left].id, sym[right].id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), bigram_after);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), bigram_after);
    Bigram bg = heap.back();
    heap.pop_back();
    Symbol& l = sym[bg.left];
    Symbol& r = sym[bg.right];
    if (l.len == 0 || l.next != bg.right || l.id != bg.left_id || r.id != bg.right_id) continue;  // stale
    l.id = bg.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.id >= 0 && s.id < n_vocab_) {
      out.push_back(s.id);
      continue;
    }
    // Not a token: its bytes one by one. A byte the vocabulary has no token
    // for is dropped, as llama.cpp does (unk would put e.g. SmolLM2's
    // <|endoftext|> into the prompt).
    for (uint32_t k = 0; k < s.len; ++k) {
      int32_t id = byte_token_[static_cast<uint8_t>(word[s.start + k])];
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace basalt::tokenizer_detail
