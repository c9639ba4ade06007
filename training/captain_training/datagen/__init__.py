"""``captain datagen``: SFT rows from the harness's teacher episodes.

See ``records.py`` for the expected input (a directory of episode JSONL records in the row
format) and ``build.py`` for the per-request and prefix-packed row layouts.
"""
