// SPDX-License-Identifier: MIT
#include "core/tokenizer/pre_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace basalt::tokenizer_detail {

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes) {
  for (const std::string& re : regexes) {
    int err = 0;
    PCRE2_SIZE at = 0;
    auto c = std::make_unique<Compiled>();
    // UCP: \s, \d, \w and the POSIX classes follow Unicode, as the tokenizers' regexes mean them.
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                            &err, &at, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("pre-tokenizer regex " + re + ": " + reinterpret_cast<const char*>(msg) + " at offset " +
                  std::to_string(at));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // where PCRE2 has a JIT; else it interprets
    regexes_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& words) const {
  // Word boundaries as byte offsets; each regex refines them.
  std::vector<size_t> cuts{0, text.size()}, next;
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    next.assign(1, 0);
    auto cut = [&](size_t at) {
      if (at > next.back()) next.push_back(at);
    };
    for (size_t w = 0; w + 1 < cuts.size(); ++w) {
      // Matches inside this word only (as llama.cpp runs each regex on each word).
      const size_t begin = cuts[w], end = cuts[w + 1];
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
      size_t pos = 0;
      while (pos < end - begin) {
        const int rc = pcre2_match(re->code, subject, end - begin, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;  // no more matches (or a matching limit): the rest stays one word
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {  // an empty match (a lookahead) cuts there, as llama.cpp's; then one character on
          cut(begin + ov[0]);
          pos = ov[0] + 1;
          while (pos < end - begin && (static_cast<unsigned char>(text[begin + pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        cut(begin + ov[0]);
        cut(begin + ov[1]);
        pos = ov[1];
      }
      cut(end);
    }
    pcre2_match_data_free(md);
    cuts.swap(next);
  }
  for (size_t w = 0; w + 1 < cuts.size(); ++w) words.push_back(text.substr(cuts[w], cuts[w + 1] - cuts[w]));
}

}  // namespace basalt::tokenizer_detail
