"""Stage 1 of CaPtain: supervised fine-tuning on CaPtain-SFT-Data rows.

Modules, in data order:

* ``rows`` / ``reader``: the row format, streaming reader and whole-file validation;
* ``supervision`` / ``hint_mask`` / ``render``: which tokens are supervised and with what
  weight, the text-hint mask, rendering with the Qwen3.5 processor;
* ``ordering`` / ``prepare``: ``mix_order`` and ``sup_tokens``, the prepared data directory;
* ``loss`` / ``distributed`` / ``checkpoint`` / ``schedule`` / ``trainer``: the trainer;
* ``cli``: ``captain sft validate|prepare|train``; ``bench``: ``captain bench sft``.

Importing this package is cheap; torch and transformers load only with the trainer modules.
"""
