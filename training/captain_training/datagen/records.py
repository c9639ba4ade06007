"""Episode records written by the harness, the input of ``captain datagen``.

Input: a directory of episode files, one file per episode, one line per model request.
The harness's records root has them as ``episodes/<episode>/rows.jsonl`` (with images under
``images/episodes/<episode>/``, relative to the records root, which is then the image root);
every ``rows.jsonl`` below the given directory is used. A directory without any
``rows.jsonl`` is read as a flat set of ``*.jsonl`` episode files. Each line is a request in
the CaPtain-SFT-Data row format, ending with the model's reply to it::

    {"images": [relative image paths in order of appearance],
     "tools": [the python tool schema],
     "messages": [system, user <environment_context>, user task request (+ images), ...,
                  assistant reply of this request],
     "meta": {"episode": str, "suite": str, "task_id": int, "seed": int,
              "request_index": int, "host_final_success": bool,
              optional: "nosup_reason", "loss_weight", "origin", "subset", "perturb_axes", ...}}

``messages`` is exactly the request the harness sent (after its context management) plus
the reply, so a request's record is a prefix of the next one unless the harness compacted
the history or dropped old images in between.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from captain_training.sft.errors import EpisodeRecordError
from captain_training.sft.rows import normalize_row

REQUIRED_META = ("episode", "request_index", "host_final_success")


@dataclass(frozen=True)
class RequestRecord:
    """One model request of an episode and the reply to it.

    Attributes:
        path: episode file the record came from.
        line_number: 1-based line in that file.
        record: the parsed record (tool-call arguments decoded to objects).
    """

    path: Path
    line_number: int
    record: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        """The record's meta object."""
        return self.record["meta"]

    @property
    def request_index(self) -> int:
        """Index of the request within its episode."""
        return int(self.meta["request_index"])

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Request messages followed by the reply."""
        return self.record["messages"]


def _check_record(record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise EpisodeRecordError(f"{where}: a record must be a JSON object")
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        raise EpisodeRecordError(f"{where}: messages must be a non-empty list of message objects")
    if messages[-1].get("role") != "assistant":
        raise EpisodeRecordError(f"{where}: messages must end with the model's reply (an assistant message), "
                                 f"got role {messages[-1].get('role')!r}")
    meta = record.get("meta")
    if not isinstance(meta, dict):
        raise EpisodeRecordError(f"{where}: meta must be an object with {', '.join(REQUIRED_META)}")
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise EpisodeRecordError(f"{where}: meta lacks {', '.join(missing)}")
    if not isinstance(meta["request_index"], int) or isinstance(meta["request_index"], bool):
        raise EpisodeRecordError(f"{where}: meta.request_index must be an integer")
    return normalize_row(record)


def read_episode(path: Path) -> list[RequestRecord]:
    """The request records of one episode file, sorted by request index."""
    records = []
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise EpisodeRecordError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            records.append(RequestRecord(path, line_number, _check_record(parsed, where)))
    episodes = {str(r.meta["episode"]) for r in records}
    if len(episodes) > 1:
        raise EpisodeRecordError(f"{path}: one file must hold one episode, found {sorted(episodes)}")
    records.sort(key=lambda r: r.request_index)
    indices = [r.request_index for r in records]
    if len(set(indices)) != len(indices):
        raise EpisodeRecordError(f"{path}: duplicate request_index values {sorted(indices)}")
    return records


#: File name of an episode's request records in the harness's records layout.
HARNESS_ROWS_FILE = "rows.jsonl"


def episode_files(directory: Path) -> Iterator[Path]:
    """Episode files under ``directory``: every ``rows.jsonl`` (recursively), else every ``*.jsonl``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise EpisodeRecordError(f"{directory} is not a directory of episode records (*.jsonl)")
    harness_files = sorted(directory.rglob(HARNESS_ROWS_FILE))
    yield from harness_files or sorted(directory.rglob("*.jsonl"))
