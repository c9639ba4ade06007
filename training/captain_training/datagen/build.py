"""Turn episode records into SFT rows of the CaPtain-SFT-Data format.

Two layouts, as in the released data:

* ``per-request``: one row per request; the row is the request plus its reply and
  ``meta.turn_index`` is the ordinal of that reply (the last assistant turn).
* ``packed`` (prefix-packed): consecutive requests whose records extend one another (each
  record starts with the previous record's full messages, i.e. no compaction and no dropped
  images in between) become one row, the last record of the group, with
  ``meta.supervise_turns`` listing the ordinals of every reply of the group. The context of
  each supervised reply is then exactly what the model saw at that request.

Requests marked ``nosup_reason`` stay unsupervised (per-request: the row keeps the reason;
packed: the reply is left out of ``supervise_turns``). Groups never mix loss weights.
Only episodes whose records say ``host_final_success: true`` are used unless asked otherwise.
Every produced row passes the same structure check as released rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_training.datagen.records import RequestRecord, episode_files, read_episode
from captain_training.sft.errors import EpisodeRecordError
from captain_training.sft.rows import assistant_message_indices, image_refs, row_problems

MODES = ("per-request", "packed")
DEFAULT_MAX_PACKED = 8
#: Meta keys copied from the records to the rows (besides the ones datagen sets).
COPIED_META = ("episode", "suite", "task_id", "seed", "origin", "perturb_axes", "host_final_success",
               "loss_weight", "total_tokens")


@dataclass
class DatagenResult:
    """Counts of one ``captain datagen`` run."""

    out_path: Path
    n_episodes: int = 0
    n_episodes_skipped_unsuccessful: int = 0
    n_requests: int = 0
    n_rows: int = 0
    n_unsupervised_rows: int = 0
    n_supervised_turns: int = 0
    #: requests the w_t = 0 detector masked (``loops.py``), by reason
    n_masked_repeated_failure: int = 0
    n_masked_recovery_loop: int = 0
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary."""
        return {"out": str(self.out_path), "episodes": self.n_episodes,
                "episodes_skipped_unsuccessful": self.n_episodes_skipped_unsuccessful,
                "requests": self.n_requests, "rows": self.n_rows, "unsupervised_rows": self.n_unsupervised_rows,
                "supervised_turns": self.n_supervised_turns,
                "masked_repeated_execution_failure": self.n_masked_repeated_failure,
                "masked_recovery_loop": self.n_masked_recovery_loop}


def _prefixed(messages: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    if not prefix:
        return messages
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "image" for p in content):
            content = [
                {**p, "image": prefix + p["image"]}
                if isinstance(p, dict) and p.get("type") == "image" and not str(p.get("image", "")).startswith("/")
                else p
                for p in content
            ]
            message = {**message, "content": content}
        out.append(message)
    return out


def _row(last: RequestRecord, group: list[RequestRecord], mode: str, subset: str, image_prefix: str) -> dict:
    record = last.record
    messages = _prefixed(record["messages"], image_prefix)
    meta_in = last.meta
    meta: dict[str, Any] = {k: meta_in[k] for k in COPIED_META if k in meta_in}
    meta.update(source="agent", subset=meta_in.get("subset", subset), request_index=last.request_index)
    meta.setdefault("origin", "harness")
    n_turns = len(assistant_message_indices(messages))
    episode = str(meta_in["episode"])
    if mode == "per-request":
        row_id = f"{episode}#req-{last.request_index:03d}"
        meta["turn_index"] = n_turns - 1
        if meta_in.get("nosup_reason") is not None:
            meta["nosup_reason"] = meta_in["nosup_reason"]
    else:
        row_id = f"{episode}#req-{group[0].request_index:03d}-{last.request_index:03d}"
        turns = [len(assistant_message_indices(member.messages)) - 1 for member in group
                 if member.meta.get("nosup_reason") is None]
        meta["packed_n"] = len(group)
        if turns:
            meta["supervise_turns"] = turns
        else:
            reasons = sorted({str(m.meta["nosup_reason"]) for m in group})
            meta["nosup_reason"] = "; ".join(reasons)
    tools = record.get("tools")
    row: dict[str, Any] = {"id": row_id, "images": image_refs(messages)}
    if tools is not None:
        row["tools"] = tools
    row["messages"] = messages
    meta["n_images"] = len(row["images"])
    row["meta"] = meta
    return row


def _extends(previous: RequestRecord, current: RequestRecord) -> bool:
    before = previous.messages
    after = current.messages
    return len(after) > len(before) and after[:len(before)] == before


def _groups(records: list[RequestRecord], mode: str, max_packed: int) -> Iterator[list[RequestRecord]]:
    if mode == "per-request":
        for record in records:
            yield [record]
        return
    group: list[RequestRecord] = []
    for record in records:
        if group and (len(group) >= max_packed or not _extends(group[-1], record)
                      or record.meta.get("loss_weight") != group[-1].meta.get("loss_weight")):
            yield group
            group = []
        group.append(record)
    if group:
        yield group


def episode_rows(records: list[RequestRecord], *, mode: str = "per-request", max_packed: int = DEFAULT_MAX_PACKED,
                 subset: str = "harness", image_prefix: str = "") -> list[dict[str, Any]]:
    """The rows of one episode (records sorted by request index)."""
    if mode not in MODES:
        raise EpisodeRecordError(f"mode {mode!r} is not one of: {', '.join(MODES)}")
    if max_packed < 1:
        raise EpisodeRecordError(f"max_packed must be >= 1, got {max_packed}")
    rows = []
    for group in _groups(records, mode, max_packed):
        row = _row(group[-1], group, mode, subset, image_prefix)
        problems = row_problems(row)
        if problems:
            last = group[-1]
            raise EpisodeRecordError(f"{last.path}:{last.line_number}: the row built from this record is "
                                     "malformed: " + "; ".join(problems))
        rows.append(row)
    return rows


def generate_rows(episodes_dir: Path, out_path: Path, *, mode: str = "per-request",
                  max_packed: int = DEFAULT_MAX_PACKED, include_unsuccessful: bool = False,
                  subset: str = "harness", image_prefix: str = "", mask_loops: bool = True) -> DatagenResult:
    """Write the rows of every episode under ``episodes_dir`` to ``out_path`` (JSONL).

    Args:
        episodes_dir: directory of episode record files (see ``records.py``).
        out_path: row file to write (replaced atomically when complete).
        mode: ``per-request`` or ``packed``.
        max_packed: most requests per packed row.
        include_unsuccessful: also use episodes without ``host_final_success``.
        subset: ``meta.subset`` of rows whose records do not set one.
        image_prefix: prepended to relative image paths (when the rows' image root is a parent
            of the records' one).
        mask_loops: leave requests with repeated execution failures or recovery loops
            unsupervised (w_t = 0, ``loops.py``), whichever policy recorded them.
    """
    from captain_training.datagen.loops import RECOVERY_LOOP, REPEATED_FAILURE
    from captain_training.datagen.loops import mask_loops as detect

    out_path = Path(out_path)
    result = DatagenResult(out_path=out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    staging = out_path.with_name(f".{out_path.name}.tmp")
    with open(staging, "w", encoding="utf-8") as handle:
        for path in episode_files(episodes_dir):
            records = read_episode(path)
            if not records:
                continue
            result.n_episodes += 1
            if not include_unsuccessful and not all(r.meta.get("host_final_success") is True for r in records):
                result.n_episodes_skipped_unsuccessful += 1
                result.skipped.append(str(path))
                continue
            result.n_requests += len(records)
            if mask_loops:
                records, masked = detect(records)
                result.n_masked_repeated_failure += masked[REPEATED_FAILURE]
                result.n_masked_recovery_loop += masked[RECOVERY_LOOP]
            for row in episode_rows(records, mode=mode, max_packed=max_packed, subset=subset,
                                    image_prefix=image_prefix):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                result.n_rows += 1
                meta = row["meta"]
                if meta.get("nosup_reason") is not None:
                    result.n_unsupervised_rows += 1
                else:
                    result.n_supervised_turns += len(meta.get("supervise_turns", [meta.get("turn_index")]))
    staging.replace(out_path)
    return result
