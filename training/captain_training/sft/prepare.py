"""``captain sft prepare``: check, measure, re-order and index a row file for training.

One streaming pass checks every row and measures it (length with images, supervised tokens;
only image headers are read). Every problem of the file is collected: malformed rows,
missing images, rows longer than ``max_length``. If there is any, nothing is written and
:class:`PreparedDataError` lists them all. Otherwise the prepared directory holds:

* ``rows.jsonl``: the rows (bytes unchanged) in :func:`mix_order` layout for ``W`` ranks;
* ``index.npz``: per output row its byte offset, source line, token and supervised counts;
* ``manifest.json``: layout, counts and the loss constant ``C`` (see ``ordering.py``).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from captain_training.sft.errors import PreparedDataError, RowFormatError, SFTError
from captain_training.sft.ordering import LossConstant, mix_order, sup_tokens
from captain_training.sft.reader import Problem, parse_line
from captain_training.sft.render import DEFAULT_MAX_LENGTH, RowMeasure, RowRenderer
from captain_training.sft.supervision import DEFAULT_QA_LOSS_WEIGHT, SupervisionPolicy

MANIFEST_FILE = "manifest.json"
ROWS_FILE = "rows.jsonl"
INDEX_FILE = "index.npz"
FORMAT_VERSION = 1


@dataclass
class PreparedData:
    """A prepared data directory (see module docstring)."""

    path: Path
    manifest: dict[str, Any]
    offsets: np.ndarray
    source_lines: np.ndarray
    n_tokens: np.ndarray
    n_supervised: np.ndarray

    @classmethod
    def load(cls, path: Path | str) -> PreparedData:
        """Open a prepared directory; raise :class:`PreparedDataError` if it is incomplete."""
        path = Path(path)
        manifest_path = path / MANIFEST_FILE
        if not manifest_path.is_file() or not (path / ROWS_FILE).is_file() or not (path / INDEX_FILE).is_file():
            raise PreparedDataError(f"{path} is not a prepared data directory (needs {MANIFEST_FILE}, {ROWS_FILE}, "
                                    f"{INDEX_FILE}); run `captain sft prepare` first")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format_version") != FORMAT_VERSION:
            raise PreparedDataError(f"{path} was prepared with format {manifest.get('format_version')}, this "
                                    f"trainer reads format {FORMAT_VERSION}; prepare it again")
        with np.load(path / INDEX_FILE) as index:
            return cls(path=path, manifest=manifest, offsets=index["offsets"], source_lines=index["source_lines"],
                       n_tokens=index["n_tokens"], n_supervised=index["n_supervised"])

    @property
    def rows_path(self) -> Path:
        """The re-ordered row file."""
        return self.path / ROWS_FILE

    @property
    def world_size(self) -> int:
        """Ranks the rows were ordered for."""
        return int(self.manifest["world_size"])

    @property
    def grad_accum(self) -> int:
        """Micro-steps per optimizer step the rows were ordered for."""
        return int(self.manifest["grad_accum"])

    @property
    def rows_per_rank(self) -> int:
        """Rows in each rank's shard (micro-steps per epoch)."""
        return int(self.manifest["rows_per_rank"])

    @property
    def loss_constant(self) -> LossConstant:
        """The loss constant computed at preparation."""
        return LossConstant(**self.manifest["loss_constant"])

    @property
    def fingerprint(self) -> str:
        """Identity of the prepared rows (used to refuse resuming on other data)."""
        return str(self.manifest["fingerprint"])


@dataclass
class _Measured:
    line_number: int
    offset: int
    length: int
    measure: RowMeasure | None = None
    suite: str | None = None
    row_id: str = ""
    problems: list[str] = field(default_factory=list)
    too_long: bool = False


_WORKER: dict[str, Any] = {}


def _init_worker(source: str, processor_path: str, image_root: str | None, max_length: int,
                 qa_loss_weight: float, hint_mask_probability: float, processor: Any = None) -> None:
    from captain_training.models.family import load_processor

    if processor is None:
        processor = load_processor(processor_path)
    _WORKER["renderer"] = RowRenderer(
        processor, image_root=image_root, max_length=max_length,
        policy=SupervisionPolicy(qa_loss_weight=qa_loss_weight), hint_mask_probability=hint_mask_probability)
    _WORKER["source"] = open(source, "rb")  # noqa: SIM115 - lives as long as the worker


def _close_worker() -> None:
    handle = _WORKER.pop("source", None)
    if handle is not None:
        handle.close()


def _measure_line(item: tuple[int, int, int]) -> _Measured:
    """Measure one line, read by the worker itself (only line positions cross process boundaries)."""
    line_number, offset, length = item
    result = _Measured(line_number=line_number, offset=offset, length=length)
    renderer: RowRenderer = _WORKER["renderer"]
    handle = _WORKER["source"]
    handle.seek(offset)
    raw = handle.read(length)
    try:
        row = parse_line(raw, line_number)
    except RowFormatError as exc:
        result.problems = exc.problems
        return result
    from captain_training.sft.reader import RowRecord

    record = RowRecord(line_number, offset, row)
    result.row_id = record.row_id
    meta = row["meta"]
    result.suite = meta.get("suite") if meta.get("source") == "agent" else None
    try:
        result.measure = renderer.measure(record)
    except SFTError as exc:
        result.problems = [str(exc).removeprefix(f"line {line_number}: ")]
        return result
    if result.measure.n_tokens > renderer.max_length:
        result.too_long = True
        result.problems = [f"row {record.row_id!r} renders to {result.measure.n_tokens} tokens, more than "
                           f"--max-length {renderer.max_length}; rows are never truncated: raise --max-length "
                           "or remove the row"]
    return result


def _line_spans(path: Path) -> Iterator[tuple[int, int, int]]:
    """(line number, byte offset, byte length) of every line, streaming."""
    offset = 0
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            yield line_number, offset, len(raw)
            offset += len(raw)


def _file_fingerprint(path: Path) -> str:
    stat = path.stat()
    digest = hashlib.sha256(f"{stat.st_size}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
        if stat.st_size > 1 << 20:
            handle.seek(max(0, stat.st_size - (1 << 20)))
            digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


def prepare(
    source: Path | str,
    out_dir: Path | str,
    *,
    processor_path: Path | str,
    image_root: Path | str | None = None,
    world_size: int = 1,
    grad_accum: int = 1,
    max_length: int = DEFAULT_MAX_LENGTH,
    suite_cap: int | None = None,
    qa_loss_weight: float = DEFAULT_QA_LOSS_WEIGHT,
    hint_mask_probability: float = 0.2,
    workers: int = 1,
    max_problems: int = 1000,
    progress: Callable[[int], None] | None = None,
    processor: Any = None,
    drop_too_long: bool = False,
) -> PreparedData:
    """Prepare ``source`` for training on ``world_size`` ranks (see module docstring).

    Args:
        source: JSONL row file in global training order.
        out_dir: directory to write (created; existing prepared files are replaced).
        processor_path: model directory whose tokenizer, image processor and chat template render rows.
        image_root: directory the image paths are relative to (the dataset root).
        world_size, grad_accum: run layout the rows are ordered for.
        max_length: longest allowed row in tokens.
        suite_cap: keep at most this many agent rows per ``meta.suite`` (first ones in order).
        qa_loss_weight: weight of visual-QA rows (recorded; weighted token totals).
        hint_mask_probability: text-hint mask probability used in training (lengths are measured
            with history coordinates masked as well, so masking can never exceed ``max_length``).
        workers: processes measuring rows.
        max_problems: problems listed in the error (all are counted).
        progress: called with the number of rows measured so far, every 1,000 rows.
        processor: an already loaded processor of ``processor_path`` (single worker only).
        drop_too_long: leave out rows longer than ``max_length`` (counted in the manifest as
            ``n_dropped_too_long``) instead of failing; rows are never truncated either way.
    """
    source = Path(source)
    out_dir = Path(out_dir)
    start = time.perf_counter()
    init_args = (str(source), str(processor_path), str(image_root) if image_root is not None else None, int(max_length),
                 float(qa_loss_weight), float(hint_mask_probability))
    measured: list[_Measured] = []
    if workers > 1:
        context = multiprocessing.get_context("spawn")
        with context.Pool(workers, initializer=_init_worker, initargs=init_args) as pool:
            for item in pool.imap(_measure_line, _line_spans(source), chunksize=16):
                measured.append(item)
                if progress is not None and len(measured) % 1000 == 0:
                    progress(len(measured))
    else:
        _init_worker(*init_args, processor=processor)
        try:
            for item in map(_measure_line, _line_spans(source)):
                measured.append(item)
                if progress is not None and len(measured) % 1000 == 0:
                    progress(len(measured))
        finally:
            _close_worker()
    too_long = [m for m in measured if m.too_long]
    if drop_too_long and too_long:
        measured = [m for m in measured if not m.too_long]
    problems = [Problem(m.line_number, p) for m in measured for p in m.problems]
    if problems:
        bad_rows = len({p.line_number for p in problems})
        listed = "\n".join(str(p) for p in problems[:max_problems])
        more = f"\n... and {len(problems) - max_problems} more" if len(problems) > max_problems else ""
        raise PreparedDataError(f"{source}: {bad_rows} of {len(measured)} rows have problems; nothing was "
                                f"written:\n{listed}{more}")
    if not measured:
        raise PreparedDataError(f"{source} has no rows")

    selected = measured
    capped: Counter[str] = Counter()
    if suite_cap is not None:
        kept: Counter[str] = Counter()
        selected = []
        for m in measured:
            if m.suite is not None:
                if kept[m.suite] >= suite_cap:
                    capped[m.suite] += 1
                    continue
                kept[m.suite] += 1
            selected.append(m)
    order = mix_order(len(selected), world_size, grad_accum)
    if not order:
        raise PreparedDataError(f"{len(selected)} rows cannot fill one optimizer step of world_size x grad_accum = "
                                f"{world_size * grad_accum} rows")
    used = [selected[i] for i in order]
    constant = sup_tokens([m.measure.n_supervised for m in used if m.measure is not None], world_size, grad_accum)

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_FILE).unlink(missing_ok=True)  # the directory is incomplete until the manifest is back
    rows_tmp = out_dir / f".{ROWS_FILE}.tmp"
    offsets = np.zeros(len(used), dtype=np.int64)
    written = 0
    with open(source, "rb") as src, open(rows_tmp, "wb") as dst:
        for position, m in enumerate(used):
            src.seek(m.offset)
            raw = src.read(m.length)
            if not raw.endswith(b"\n"):
                raw += b"\n"
            offsets[position] = written
            dst.write(raw)
            written += len(raw)
    index_tmp = out_dir / f".{INDEX_FILE}.tmp.npz"
    np.savez(index_tmp, offsets=offsets,
             source_lines=np.array([m.line_number for m in used], dtype=np.int64),
             n_tokens=np.array([m.measure.n_tokens for m in used], dtype=np.int64),
             n_supervised=np.array([m.measure.n_supervised for m in used], dtype=np.int64))
    n_tokens = [m.measure.n_tokens for m in used]
    weighted = sum(m.measure.n_supervised * m.measure.weight for m in used)
    dropped = len(selected) - len(used)
    fingerprint = hashlib.sha256(json.dumps(
        [_file_fingerprint(source), world_size, grad_accum, len(used), suite_cap]).encode()).hexdigest()[:16]
    manifest = {
        "format_version": FORMAT_VERSION,
        "fingerprint": fingerprint,
        "source": str(source.resolve()),
        "processor_path": str(Path(processor_path).resolve()),
        "image_root": str(Path(image_root).resolve()) if image_root is not None else None,
        "world_size": world_size,
        "grad_accum": grad_accum,
        "rows_per_rank": len(used) // world_size,
        "optimizer_steps_per_epoch": len(used) // (world_size * grad_accum),
        "n_source_rows": len(measured),
        "n_rows": len(used),
        "n_dropped_incomplete_step": dropped,
        "n_dropped_too_long": len(too_long) if drop_too_long else 0,
        "suite_cap": suite_cap,
        "n_capped_by_suite": dict(sorted(capped.items())),
        "max_length": max_length,
        "max_row_tokens": int(max(n_tokens)),
        "total_tokens": int(sum(n_tokens)),
        "supervised_tokens": constant.supervised_tokens,
        "weighted_supervised_tokens": float(weighted),
        "qa_loss_weight": qa_loss_weight,
        "hint_mask_probability": hint_mask_probability,
        "loss_constant": constant.to_dict(),
        "prepare_s": round(time.perf_counter() - start, 3),
    }
    os.replace(rows_tmp, out_dir / ROWS_FILE)
    os.replace(index_tmp, out_dir / INDEX_FILE)
    manifest_tmp = out_dir / f".{MANIFEST_FILE}.tmp"
    manifest_tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(manifest_tmp, out_dir / MANIFEST_FILE)
    return PreparedData.load(out_dir)

