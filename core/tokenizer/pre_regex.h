// SPDX-License-Identifier: MIT
// Pre-tokenizers as data: a sequence of split regexes, run by PCRE2 (Unicode
// properties on), as llama.cpp's unicode_regex_split applies them: each
// regex cuts every word the previous ones made into its matches and the gaps
// between them, all kept. Used for the pre-tokenizers that have no
// hand-written splitter in bpe.cpp (which stays for the common ones: it is
// faster).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace basalt::tokenizer_detail {

class RegexSplitter {
 public:
  // Error naming the regex and PCRE2's complaint where one does not compile.
  explicit RegexSplitter(const std::vector<std::string>& regexes);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends text's words (byte ranges of text, in order, covering it all).
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace basalt::tokenizer_detail
