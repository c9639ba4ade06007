"""Models by name and by family: build, load for training, load for serving.

* ``family.py``: which family a model directory belongs to, read from its ``config.json``
  (a Qwen3.5 VLM or any other Hugging Face causal LM), and the loaders every stage uses
  (SFT trainer, RL endpoint, ``captain serve``), so no stage special-cases a model.
* ``text_processor.py``: the processor of a text-only model (tokenizer + chat template; image
  parts render as a placeholder text the template defines).
* ``text_template.py``: the chat template of text-only models (the Qwen3.5 format with image
  placeholders as text), so the harness parses their tool calls like Qwen3.5's.
* ``build.py`` / ``cli.py``: ``captain model build tiny-qwen3.5|tiny-smollm2|smollm2-135m --out DIR``.
"""
