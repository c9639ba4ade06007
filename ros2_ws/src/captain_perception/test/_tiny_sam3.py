"""A tiny, randomly initialised SAM 3 checkpoint, built offline for the segmenter tests.

The folder has what a real transformers SAM 3 checkpoint has: ``config.json``
(``model_type: sam3``, or ``sam3_video`` with the detector under ``detector_config`` and
its weights under ``detector_model.`` as published), ``model.safetensors``, a CLIP BPE
tokenizer (``tokenizer.json`` / ``tokenizer_config.json``) and a
``preprocessor_config.json`` in the format ``Sam3ImageProcessor`` writes. Every size is
shrunk (2-layer ViT of width 32 on 112 x 112 px images, 8 queries) so that one
forward pass takes milliseconds on a CPU. The weights are random: scores and masks
carry no meaning, only their shapes, ranges and plumbing do.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Image side of the tiny checkpoint, pixels (8 x 8 patches of 14 px).
IMAGE_SIZE_PX = 112
#: Number of instance queries of the tiny detector.
NUM_QUERIES = 8
#: Normalisation written to preprocessor_config.json (ImageNet, so it differs from the 0.5 defaults).
IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
#: Words whose BPE merges are in the tiny vocabulary (others fall back to single bytes).
WORDS = ("red", "green", "blue", "cube", "plate", "block")
HIDDEN = 32


def tiny_tokenizer():
    """A CLIP byte-level BPE tokenizer over the 256 byte symbols plus merges for ``WORDS``."""
    from tokenizers import pre_tokenizers
    from transformers import CLIPTokenizer

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab: dict[str, int] = {}
    for s in symbols + [s + "</w>" for s in symbols]:
        vocab[s] = len(vocab)
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        head = word[0]
        for ch in word[1:-1]:
            merges.append((head, ch))
            head += ch
            vocab.setdefault(head, len(vocab))
        merges.append((head, word[-1] + "</w>"))
        vocab.setdefault(word + "</w>", len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=merges)


def tiny_config(tokenizer):
    """A ``Sam3Config`` with every sub-model shrunk (see the module docstring)."""
    from transformers import Sam3Config

    small = {"num_attention_heads": 2, "intermediate_size": 2 * HIDDEN}
    patches = IMAGE_SIZE_PX // 14
    return Sam3Config(
        vision_config={
            "backbone_config": {"model_type": "sam3_vit_model", "hidden_size": HIDDEN, "num_hidden_layers": 2,
                                "image_size": IMAGE_SIZE_PX, "patch_size": 14, "window_size": 4,
                                "global_attn_indexes": [1], "pretrain_image_size": IMAGE_SIZE_PX // 2, **small},
            "fpn_hidden_size": HIDDEN,
            "backbone_feature_sizes": [[4 * patches] * 2, [2 * patches] * 2, [patches] * 2],
        },
        text_config={"model_type": "clip_text_model", "vocab_size": len(tokenizer), "hidden_size": HIDDEN,
                     "projection_dim": HIDDEN, "num_hidden_layers": 1, "max_position_embeddings": 32,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id, **small},
        geometry_encoder_config={"hidden_size": HIDDEN, "num_layers": 1, **small},
        detr_encoder_config={"hidden_size": HIDDEN, "num_layers": 1, **small},
        detr_decoder_config={"hidden_size": HIDDEN, "num_layers": 1, "num_queries": NUM_QUERIES, **small},
        mask_decoder_config={"hidden_size": HIDDEN, "num_attention_heads": 2},
    )


def preprocessor_config() -> dict:
    """``preprocessor_config.json`` as ``Sam3ImageProcessor`` writes it, at the tiny size."""
    return {"image_processor_type": "Sam3ImageProcessor", "processor_class": "Sam3Processor",
            "do_convert_rgb": True, "do_resize": True, "do_rescale": True, "do_normalize": True,
            "rescale_factor": 1 / 255, "resample": 2, "image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD),
            "size": {"height": IMAGE_SIZE_PX, "width": IMAGE_SIZE_PX},
            "mask_size": {"height": 4 * (IMAGE_SIZE_PX // 14), "width": 4 * (IMAGE_SIZE_PX // 14)}}


def build_tiny_sam3(folder: str | Path, seed: int = 0, dtype: str = "float32", video_layout: bool = False,
                    with_preprocessor: bool = True) -> Path:
    """Write a tiny random SAM 3 checkpoint into ``folder`` and return it.

    Args:
        folder: target folder (created).
        seed: torch seed of the random weights.
        dtype: ``"float32"`` or ``"bfloat16"`` weights.
        video_layout: save as the published ``sam3_video`` checkpoint (detector inside it).
        with_preprocessor: also write ``preprocessor_config.json``.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import Sam3Model, Sam3VideoConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_tokenizer()
    config = tiny_config(tokenizer)
    torch.manual_seed(seed)
    model = Sam3Model(config).eval().to(getattr(torch, dtype))
    if video_layout:
        Sam3VideoConfig(detector_config=config.to_dict()).save_pretrained(folder)
        weights = {f"detector_model.{k}": v.contiguous() for k, v in model.state_dict().items()}
        weights["tracker_model.unused.weight"] = torch.zeros(2)
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if with_preprocessor:
        (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor_config(), indent=2))
    return folder
