"""SAM 3 (the paper's text-prompted segmenter), loaded from local weights only.

Two loaders are tried, in order:

1. **transformers** (``Sam3Model`` + the checkpoint's tokenizer): the weights folder is a
   Hugging Face checkpoint (``config.json`` with ``model_type`` ``sam3``, or ``sam3_video``
   as published, whose image detector is loaded; ``*.safetensors``, the tokenizer files,
   optionally ``preprocessor_config.json``). Pre- and post-processing are done here with
   torch alone, as the checkpoint's ``Sam3ImageProcessor`` does them (bilinear antialiased
   resize to its ``size``, rescale to [0, 1], normalise with its ``image_mean`` /
   ``image_std``; sigmoid scores times the presence score, mask upsampling to the frame),
   so no torchvision is needed.
2. the **sam3** package (Meta's reference code) with a checkpoint file
   (``sam3.pt``) in the folder, when transformers cannot load it.

Nothing is ever downloaded: with no path configured, a missing folder or missing files
the backend fails with ``BackendUnavailableError`` saying what to put where, and the
harness keeps working with the classical segmenter.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from captain_perception.core.errors import BackendUnavailableError, NothingFoundError
from captain_perception.core.pointcloud import FrameCloud
from captain_perception.core.segmenters.base import Segment, Segmenter

#: Normalisation of ``Sam3ImageProcessor`` when the checkpoint has no preprocessor_config.json.
DEFAULT_MEAN = (0.5, 0.5, 0.5)
DEFAULT_STD = (0.5, 0.5, 0.5)
#: ``model_type`` values whose checkpoints hold a SAM 3 image detector that ``Sam3Model`` loads.
MODEL_TYPES = ("sam3", "sam3_video")
#: Prompt length (tokens) when the text config does not give one, as ``Sam3Processor`` pads.
DEFAULT_TEXT_LENGTH = 32


class Sam3Segmenter(Segmenter):
    """SAM 3 behind the segmenter interface (see the module docstring).

    Args:
        weights_path: local folder of a SAM 3 checkpoint; None means not configured.
        device: torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        score_threshold: instances below this score are dropped.
        mask_threshold: probability above which a mask pixel is set.
    """

    name = "sam3"

    def __init__(self, weights_path: str | Path | None = None, device: str = "cpu",
                 score_threshold: float = 0.4, mask_threshold: float = 0.5) -> None:
        self.weights_path = Path(weights_path).expanduser() if weights_path else None
        self.device = device
        self.score_threshold = float(score_threshold)
        self.mask_threshold = float(mask_threshold)
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._input_size_hw = (1008, 1008)
        self._mean = DEFAULT_MEAN
        self._std = DEFAULT_STD
        self._loader = ""

    def describe(self) -> dict[str, Any]:
        """Backend, weights folder and which loader was used (once loaded)."""
        return {"backend": self.name, "weights": str(self.weights_path) if self.weights_path else None,
                "loader": self._loader or None, "device": self.device}

    # ----------------------------------------------------------------- loading
    def check_weights(self) -> Path:
        """The weights folder, after checking that it can be loaded from.

        Raises:
            BackendUnavailableError: not configured, missing, or without the expected files.
        """
        if self.weights_path is None:
            raise BackendUnavailableError(
                "SAM 3 is not configured: set CAPTAIN_SAM3_WEIGHTS (in-process; on the perception node its "
                "parameter sam3_weights_path) to a local SAM 3 checkpoint folder (config.json, model.safetensors "
                "and tokenizer files, as saved by transformers), or set CAPTAIN_SEGMENTER=classical (node: "
                "segmenter:=classical) for the classical segmenter")
        path = self.weights_path
        if not path.is_dir():
            raise BackendUnavailableError(
                f"SAM 3 weights folder {path} does not exist; copy a SAM 3 checkpoint there (nothing is "
                "downloaded at run time) and set CAPTAIN_SAM3_WEIGHTS (node: sam3_weights_path) to it, or set "
                "CAPTAIN_SEGMENTER=classical (node: segmenter:=classical)")
        has_hf = (path / "config.json").is_file() and any(path.glob("*.safetensors"))
        has_ref = any(path.glob("*.pt"))
        if not has_hf and not has_ref:
            present = sorted(p.name for p in path.iterdir())[:12]
            raise BackendUnavailableError(
                f"SAM 3 weights folder {path} has no checkpoint: expected config.json with *.safetensors "
                f"(transformers format) or a sam3 *.pt file; found {present or 'nothing'}")
        if has_hf:
            try:
                cfg = json.loads((path / "config.json").read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise BackendUnavailableError(f"cannot read {path / 'config.json'}: {exc}") from exc
            if cfg.get("model_type") not in MODEL_TYPES and not has_ref:
                raise BackendUnavailableError(
                    f"{path / 'config.json'} describes a {cfg.get('model_type')!r} model, not 'sam3' or "
                    "'sam3_video'; point CAPTAIN_SAM3_WEIGHTS (node: sam3_weights_path) at a SAM 3 checkpoint")
        return path

    def load(self) -> None:
        """Load the model once (thread-safe). Raises ``BackendUnavailableError`` on failure."""
        with self._lock:
            if self._model is not None:
                return
            path = self.check_weights()
            errors: list[str] = []
            if (path / "config.json").is_file():
                try:
                    self._load_transformers(path)
                    self._loader = "transformers"
                    return
                except Exception as exc:
                    errors.append(f"transformers: {type(exc).__name__}: {exc}")
            if importlib.util.find_spec("sam3") is not None and any(path.glob("*.pt")):
                try:
                    self._load_reference(path)
                    self._loader = "sam3"
                    return
                except Exception as exc:
                    errors.append(f"sam3 package: {type(exc).__name__}: {exc}")
            elif any(path.glob("*.pt")):
                errors.append("sam3 package: not installed (pip install sam3) for the *.pt checkpoint")
            raise BackendUnavailableError(f"cannot load SAM 3 from {path}: " + "; ".join(errors)[:500])

    def _load_transformers(self, path: Path) -> None:
        from transformers import AutoTokenizer, Sam3Model

        model = Sam3Model.from_pretrained(str(path), local_files_only=True)
        model.eval().to(self.device)
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        size = model.config.vision_config.backbone_config.image_size
        size_hw = _pair(size)
        mean, std = DEFAULT_MEAN, DEFAULT_STD
        pre = path / "preprocessor_config.json"
        if pre.is_file():
            meta = json.loads(pre.read_text())
            mean = _triple(meta.get("image_mean", mean))
            std = _triple(meta.get("image_std", std))
            sz = meta.get("size") or {}
            if isinstance(sz, dict):
                side = sz.get("longest_edge", sz.get("shortest_edge"))
                size_hw = (int(sz.get("height", side or size_hw[0])), int(sz.get("width", side or size_hw[1])))
            else:
                size_hw = _pair(sz)
        self._model, self._tokenizer = model, tokenizer
        self._input_size_hw, self._mean, self._std = size_hw, mean, std

    def _load_reference(self, path: Path) -> None:
        from sam3.model.sam3_image_processor import Sam3Processor  # type: ignore[import-not-found]
        from sam3.model_builder import build_sam3_image_model  # type: ignore[import-not-found]

        ckpt = sorted(path.glob("*.pt"))[0]
        model = build_sam3_image_model(checkpoint_path=str(ckpt), load_from_HF=False, device=self.device)
        self._model = Sam3Processor(model)
        self._tokenizer = None

    # --------------------------------------------------------------- inference
    def segment(self, cloud: FrameCloud, text: str, max_results: int = 5) -> list[Segment]:
        """Instances of ``text`` in the frame's image, best first."""
        self.load()
        rgb = np.ascontiguousarray(cloud.frame.rgb[..., :3])
        if self._loader == "sam3":
            masks, scores = self._infer_reference(rgb, text)
        else:
            masks, scores = self._infer_transformers(rgb, text)
        order = np.argsort(-scores)
        confident = [int(i) for i in order if scores[i] >= self.score_threshold]
        out = [Segment(mask=masks[i], score=float(scores[i]), label=text, evidence={"backend": self.name})
               for i in confident if masks[i].any()][:max_results]
        if not out:
            best = float(scores.max()) if len(scores) else 0.0
            if confident:
                why = (f"{len(confident)} instance(s) scored >= {self.score_threshold} but no mask pixel has "
                       f"probability > {self.mask_threshold}")
            else:
                why = f"best score {best:.2f} < {self.score_threshold}"
            raise NothingFoundError(f"SAM 3 found no {text!r} in {cloud.frame.name} ({why}); try another wording "
                                    "or mark_point")
        return out

    @property
    def input_size_hw(self) -> tuple[int, int]:
        """(height, width) in pixels the image is resized to before the model (after ``load()``)."""
        return self._input_size_hw

    def preprocess(self, rgb: np.ndarray) -> Any:
        """Image (H, W, 3 uint8) -> normalised pixel tensor (1, 3, h, w) at ``input_size_hw``,
        on the model's device and in its dtype once loaded."""
        import torch
        from torch.nn import functional

        x = torch.from_numpy(np.ascontiguousarray(rgb[..., :3])).permute(2, 0, 1)[None].float() / 255.0
        x = functional.interpolate(x, size=self._input_size_hw, mode="bilinear", align_corners=False, antialias=True)
        mean = torch.tensor(self._mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.tensor(self._std, dtype=torch.float32).view(1, 3, 1, 1)
        x = (x - mean) / std
        dtype = getattr(self._model, "dtype", torch.float32) if self._loader == "transformers" else torch.float32
        return x.to(device=self.device, dtype=dtype)

    def _infer_transformers(self, rgb: np.ndarray, text: str) -> tuple[np.ndarray, np.ndarray]:
        import torch
        from torch.nn import functional

        h, w = rgb.shape[:2]
        length = int(getattr(self._model.config.text_config, "max_position_embeddings", DEFAULT_TEXT_LENGTH))
        tokens = self._tokenizer([text], return_tensors="pt", padding="max_length", truncation=True,
                                 max_length=length)
        with torch.no_grad():
            out = self._model(pixel_values=self.preprocess(rgb), input_ids=tokens["input_ids"].to(self.device),
                              attention_mask=tokens["attention_mask"].to(self.device))
        scores_t = out.pred_logits[0].float().sigmoid()
        if out.presence_logits is not None:
            scores_t = scores_t * out.presence_logits[0].float().sigmoid()
        scores = scores_t.cpu().numpy().reshape(-1)
        # only the instances that pass the score threshold are upsampled to the frame (the others stay empty)
        keep = np.flatnonzero(scores >= self.score_threshold)
        masks = np.zeros((len(scores), h, w), dtype=bool)
        if len(keep):
            prob = out.pred_masks[0, torch.as_tensor(keep, device=out.pred_masks.device)].float().sigmoid()
            prob = functional.interpolate(prob[None], size=(h, w), mode="bilinear", align_corners=False)[0]
            masks[keep] = (prob > self.mask_threshold).cpu().numpy()
        return masks, scores

    def _infer_reference(self, rgb: np.ndarray, text: str) -> tuple[np.ndarray, np.ndarray]:
        from PIL import Image

        state = self._model.set_image(Image.fromarray(rgb))
        result = self._model.set_text_prompt(state=state, prompt=text)
        masks = np.asarray(result["masks"]).astype(bool).reshape(-1, rgb.shape[0], rgb.shape[1])
        scores = np.asarray(result["scores"], dtype=float).reshape(-1)
        return masks, scores


def _pair(size: Any) -> tuple[int, int]:
    """An image size given as one side or (height, width) -> (height, width), pixels."""
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def _triple(value: Any) -> tuple[float, float, float]:
    """A per-channel statistic given as one number or three -> three floats (R, G, B)."""
    arr = np.broadcast_to(np.asarray(value, dtype=float).reshape(-1), (3,))
    return float(arr[0]), float(arr[1]), float(arr[2])
