"""A small OpenAI-compatible policy endpoint on 127.0.0.1 for RL on one machine.

``LocalPolicyServer`` serves ``POST /v1/chat/completions`` from a transformers causal
model loaded from a local directory (a CaPtain SFT checkpoint, or the tiny random Qwen3.5
built offline). It renders each request with the model directory's Qwen3.5 chat template
and tokenizer, samples at the requested temperature / top-p, and answers like vLLM with
token ids and log-probabilities:

* ``prompt_token_ids`` (top level) and ``choices[0].token_ids``: the exact ids it used;
* ``choices[0].logprobs.content[j].logprob``: log pi(token_j) of the full model
  distribution at temperature 1 (the RL trainer compares these with its own);
* ``policy_version`` (top level): the version of the weights that produced the reply;
* ``message.reasoning_content`` / ``content`` / ``tool_calls``: the ``<think>`` block, the
  visible text and the ``<tool_call>`` blocks parsed like vLLM's Qwen3 tool parser.

Weight synchronisation: ``POST /collective_rpc`` with ``{"method":
"captain_load_policy_weights", "args": [path, version]}`` (the call vLLM's workers answer
with ``weight_sync.PolicyWeightLoader``) or ``POST /v1/load_weights`` with ``{"path": ...,
"version": n}`` loads a state dict (``policy.pt``) or a model directory and switches to
version ``n`` between requests (``LocalPolicyServer.load_weights`` does the same
in-process). On GPU machines the same boundary is served by vLLM (``vllm serve <sft-dir>
--enable-auto-tool-choice --tool-call-parser qwen3_xml --reasoning-parser qwen3
--worker-extension-cls captain_training.rl.weight_sync.PolicyWeightLoader`` with
``VLLM_SERVER_DEV_MODE=1``), which returns token ids and logprobs.

Candidate completions (the learning check, tests): a request body may carry
``candidates`` (a list of assistant completion texts, e.g. from ``candidates.py``), or the
server may be configured with ``scripted_completions``. The server then scores every
candidate under the served model and samples one with probability proportional to its
likelihood, ``p_k ∝ exp(sum_j log pi(token_kj))`` (seeded), returning it with its token ids,
its per-token log-probabilities under the full model distribution and ``candidate_index``
(top level). The trainer sees the same fields as for sampled text; since the choice follows
the model's likelihood, a policy update changes which candidate the next request gets.

Images: a model that consumes pixels (a Qwen3.5 VLM with ``preprocessor_config.json``) gets
them as vLLM gives them: the ``image_url`` data URLs are decoded, the chat template places a
vision block per image, and the model's processor expands each into one ``<|image_pad|>`` per
merged patch and computes ``pixel_values`` / ``image_grid_thw`` / ``mm_token_type_ids``, which
go into the forward with the prompt. ``prompt_images`` (top level) counts them. The trainer
recomputes the same inputs from the recorded image files (``logprobs.multimodal_inputs``).
A text-only model sees each image part as the text ``IMAGE_PLACEHOLDER``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from captain_training.rl.errors import RLError

#: Text that stands in for an image part in this text-only server.
IMAGE_PLACEHOLDER = "[image]"

_XML_CALL = re.compile(r"<tool_call>\s*<function=([\w.-]+)>(.*?)</function>\s*</tool_call>", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)


@dataclass
class EndpointConfig:
    """Settings of the local endpoint.

    Attributes:
        model_dir: local model directory (weights + tokenizer + chat template).
        served_model_name: the ``model`` name clients send and the replies carry.
        host: bind address (loopback only).
        port: TCP port (0: a free one).
        max_new_tokens: cap on sampled tokens per request (the request's ``max_tokens`` is
            also honoured, the smaller wins).
        max_prompt_tokens: prompts longer than this are refused with HTTP 400.
        seed: sampling seed (each request draws from one seeded generator).
        device: ``cpu`` or ``cuda``.
        policy_version: version of the weights loaded at start.
        threads: torch intra-op threads for sampling (None: leave torch's setting).
        scripted_completions: assistant texts (after the generation prompt, e.g.
            ``"ok</think>\n\n<tool_call>...</tool_call>"``) scored instead of sampled; empty:
            sample.
    """

    model_dir: str
    served_model_name: str = "captain-policy"
    host: str = "127.0.0.1"
    port: int = 0
    max_new_tokens: int = 256
    max_prompt_tokens: int = 32768
    seed: int = 0
    device: str = "cpu"
    policy_version: int = 0
    threads: int | None = None
    scripted_completions: tuple[str, ...] = ()


def tool_call_text(code: str, reasoning: str = "Next step.") -> str:
    """A completion with one python tool call in the Qwen3.5 XML format (for scripted completions)."""
    return (f"{reasoning}\n</think>\n\n<tool_call>\n<function=python>\n<parameter=input>\n{code}\n"
            "</parameter>\n</function>\n</tool_call>")


def wire_to_template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions messages -> messages for the Qwen3.5 template (text-only).

    Tool-call arguments become mappings; image parts become ``IMAGE_PLACEHOLDER`` text.
    """
    out = []
    for m in messages:
        msg = dict(m)
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in ("image", "image_url"):
                    parts.append({"type": "text", "text": IMAGE_PLACEHOLDER})
                elif kind == "text":
                    parts.append({"type": "text", "text": str(part.get("text", ""))})
            msg["content"] = "".join(p["text"] for p in parts)
        elif content is None:
            msg["content"] = ""
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError:
                        args = {"input": args}
                fn["arguments"] = args if isinstance(args, dict) else {"input": str(args)}
                calls.append({**c, "function": fn})
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def decode_image_url(url: str) -> Any:
    """A PIL RGB image from a ``data:image/...;base64,...`` URL (what the harness client sends)."""
    import base64
    import io

    from PIL import Image

    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise RLError(f"image_url must be a base64 data URL (data:image/png;base64,...), got {str(url)[:40]!r}")
    try:
        with Image.open(io.BytesIO(base64.b64decode(url.split(";base64,", 1)[1]))) as im:
            return im.convert("RGB")
    except (OSError, ValueError) as exc:
        raise RLError(f"image_url does not decode to an image: {exc}") from None


def wire_to_multimodal_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Chat-completions messages -> template messages with ``{"type": "image"}`` parts, and the
    decoded images in the order they appear (what vLLM hands its processor)."""
    images: list[Any] = []
    stripped = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "image_url":
                    url = part.get("image_url")
                    images.append(decode_image_url(url.get("url") if isinstance(url, dict) else url))
                    parts.append({"type": "image"})
                elif kind == "text":
                    parts.append({"type": "text", "text": str(part.get("text", ""))})
                elif kind == "image":
                    raise RLError("image parts must be image_url data URLs on the wire")
            stripped.append({**m, "content": parts})
        else:
            stripped.append(m)
    out = wire_to_template_messages([{**m, "content": None} if isinstance(m.get("content"), list) else m
                                     for m in stripped])
    for msg, m in zip(out, stripped, strict=True):
        if isinstance(m.get("content"), list):
            msg["content"] = m["content"]
    return out, images


def parse_generation(text: str) -> dict[str, Any]:
    """Split sampled text into reasoning, visible content and tool calls (vLLM's Qwen3 parsers).

    The prompt ends inside ``<think>`` when thinking is on, so everything before ``</think>``
    is reasoning; ``<tool_call><function=NAME><parameter=P>V</parameter></function></tool_call>``
    blocks become tool calls with JSON-string arguments.
    """
    reasoning, visible = "", text
    if "</think>" in text:
        head, _, visible = text.partition("</think>")
        reasoning = head.replace("<think>", "").strip()
    calls = []
    for name, body in _XML_CALL.findall(visible):
        params = {k: v for k, v in _XML_PARAM.findall(body)}
        calls.append({"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(params)}})
    if "<tool_call>" in visible:
        visible = visible[: visible.find("<tool_call>")]
    return {"reasoning_content": reasoning, "content": visible.strip(), "tool_calls": calls}


def load_causal_model(model_dir: str | Path, device: str = "cpu") -> Any:
    """A model from a local directory, loaded as its family says (``captain_training.models.family``:
    a Qwen3.5 VLM or any Hugging Face causal LM), in eval mode."""
    from captain_training.models.family import ModelError, load_model

    try:
        return load_model(model_dir, device=device).eval()
    except ModelError as exc:
        raise RLError(str(exc)) from None


def load_tokenizer(model_dir: str | Path) -> Any:
    """The tokenizer of a model directory, with its chat template."""
    from captain_training.models.family import ModelError, load_chat_tokenizer

    try:
        return load_chat_tokenizer(model_dir)
    except ModelError as exc:
        raise RLError(str(exc)) from None


def load_multimodal_processor(model_dir: str | Path, model: Any) -> Any:
    """The processor of a model that consumes pixels (vision tower and ``preprocessor_config.json``),
    else None (a text-only model: images are rendered as placeholder text)."""
    visual = getattr(getattr(model, "model", None), "visual", None)
    if visual is None or not (Path(model_dir) / "preprocessor_config.json").is_file():
        return None
    from captain_training.models.family import load_processor

    return load_processor(model_dir)


class LocalPolicyServer:
    """The local endpoint (a context manager). See the module docstring."""

    def __init__(self, config: EndpointConfig, model: Any = None, tokenizer: Any = None) -> None:
        import torch

        if config.host not in ("127.0.0.1", "localhost", "::1"):
            raise RLError(f"the local endpoint binds to loopback only, not {config.host!r}")
        self.config = config
        if config.threads:
            torch.set_num_threads(int(config.threads))
        self.model = model if model is not None else load_causal_model(config.model_dir, config.device)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(config.model_dir)
        #: the model's processor when it consumes pixels (a Qwen3.5 VLM); None: images become text
        self.processor = load_multimodal_processor(config.model_dir, self.model)
        self.policy_version = int(config.policy_version)
        self.generator = torch.Generator(device="cpu").manual_seed(int(config.seed))
        self.lock = threading.Lock()
        self.requests_served = 0
        self.last_candidate_probs: list[float] = []
        self.tokens_generated = 0
        stop = [self.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
        self.stop_ids = {int(i) for i in stop if isinstance(i, int) and i >= 0}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/health", "/v1/health"):
                    self._send(200, {"status": "ok", "policy_version": server.policy_version})
                elif self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": server.config.served_model_name, "object": "model",
                         "policy_version": server.policy_version}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length", 0))
                    body = json.loads(self.rfile.read(length) or b"{}")
                except (ValueError, json.JSONDecodeError) as exc:
                    self._send(400, {"error": {"message": f"invalid JSON body: {exc}"}})
                    return
                route = self.path.rstrip("/")
                try:
                    if route == "/v1/chat/completions":
                        self._send(200, server.complete(body))
                    elif route == "/v1/load_weights":
                        server.load_weights(body["path"], int(body["version"]))
                        self._send(200, {"status": "ok", "policy_version": server.policy_version})
                    elif route == "/collective_rpc":
                        self._send(200, {"results": [server.collective_rpc(body)]})
                    else:
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                except (RLError, KeyError, ValueError, TypeError) as exc:
                    self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
                except Exception as exc:  # the server keeps serving; the client sees a 500
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        self.httpd = ThreadingHTTPServer((config.host, int(config.port)), Handler)
        self.port = int(self.httpd.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LocalPolicyServer:
        """Serve in a daemon thread."""
        if self.thread is None:
            self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                           name="captain-policy-endpoint")
            self.thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread = None
        self.httpd.server_close()

    def __enter__(self) -> LocalPolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- weight sync
    def load_weights(self, path: str | Path, version: int) -> None:
        """Load new weights (``policy.pt`` state dict or a model directory) as policy ``version``."""
        from captain_training.rl.weight_sync import load_state_file

        path = Path(path)
        state = load_causal_model(path, "cpu").state_dict() if path.is_dir() else load_state_file(path)
        with self.lock:
            # checked before anything is copied: a misfit leaves the served weights untouched
            current = self.model.state_dict()
            missing = [k for k in current if k not in state and "rotary" not in k]
            unexpected = [k for k in state if k not in current]
            misshaped = [k for k in state if k in current and tuple(state[k].shape) != tuple(current[k].shape)]
            if missing or unexpected or misshaped:
                raise RLError(f"weights at {path} do not fit the served model (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]}, other shapes {misshaped[:3]})")
            self.model.load_state_dict(state, strict=False)
            self.policy_version = int(version)

    def collective_rpc(self, body: dict[str, Any]) -> dict[str, Any]:
        """The one worker call vLLM's ``/collective_rpc`` would run for the trainer
        (``weight_sync.SYNC_METHOD``: load weights); other methods are refused."""
        from captain_training.rl.weight_sync import SYNC_METHOD

        method, args = body.get("method"), body.get("args") or []
        if method != SYNC_METHOD or len(args) != 2:
            raise RLError(f"collective_rpc: this server runs only {SYNC_METHOD}(path, version); got {method!r} "
                          f"with {len(args)} argument(s)")
        self.load_weights(str(args[0]), int(args[1]))
        return {"version": self.policy_version, "tensors": len(self.model.state_dict())}

    def set_state_dict(self, state: dict[str, Any], version: int) -> None:
        """Copy weights from an in-process trainer (same architecture) as policy ``version``."""
        with self.lock:
            self.model.load_state_dict(state)
            self.policy_version = int(version)

    # ----------------------------------------------------------------- serving
    def render_inputs(self, body: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
        """Prompt token ids of a body and, for a model that consumes pixels, its multimodal inputs
        (``pixel_values``, ``image_grid_thw``, ``mm_token_type_ids``; empty without images).

        A multimodal model renders like vLLM: the chat template turns each image part into
        ``<|vision_start|><|image_pad|><|vision_end|>``, then the processor expands the pad to
        one token per merged patch and computes the pixel inputs from the decoded images.
        """
        if self.processor is None:
            return self.render(body), {}
        messages, images = wire_to_multimodal_messages(body.get("messages") or [])
        kwargs = dict(body.get("chat_template_kwargs") or {})
        text = self.processor.apply_chat_template(messages, tools=body.get("tools"), add_generation_prompt=True,
                                                  tokenize=False, **kwargs)
        encoded = self.processor(text=[text], images=images or None, return_tensors="pt")
        ids = [int(i) for i in encoded["input_ids"][0].tolist()]
        mm: dict[str, Any] = {}
        if images:
            mm = {"pixel_values": encoded["pixel_values"], "image_grid_thw": encoded["image_grid_thw"],
                  "mm_token_type_ids": encoded["mm_token_type_ids"]}
        return ids, mm

    def render(self, body: dict[str, Any]) -> list[int]:
        """Prompt token ids of a chat-completions body (generation prompt appended; images as text)."""
        messages = wire_to_template_messages(body.get("messages") or [])
        kwargs = dict(body.get("chat_template_kwargs") or {})
        ids = self.tokenizer.apply_chat_template(messages, tools=body.get("tools"), add_generation_prompt=True,
                                                 tokenize=True, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        return [int(i) for i in ids]

    def _reset_positions(self) -> None:
        """Forget the M-RoPE offset a Qwen3.5 model caches from its last multimodal prompt."""
        inner = getattr(self.model, "model", None)
        if inner is not None and hasattr(inner, "rope_deltas"):
            inner.rope_deltas = None

    def _mm_kwargs(self, mm_inputs: dict[str, Any] | None) -> dict[str, Any]:
        if not mm_inputs:
            return {}
        device = next(self.model.parameters()).device
        visual = getattr(getattr(self.model, "model", None), "visual", None)
        dtype = next(visual.parameters()).dtype if visual is not None else None
        return {"pixel_values": mm_inputs["pixel_values"].to(device=device, dtype=dtype),
                "image_grid_thw": mm_inputs["image_grid_thw"].to(device),
                "mm_token_type_ids": mm_inputs["mm_token_type_ids"].to(device)}

    def sample(self, prompt_ids: list[int], max_new_tokens: int, temperature: float, top_p: float,
               mm_inputs: dict[str, Any] | None = None) -> tuple[list[int], list[float], str]:
        """Sample a completion; returns (ids, log pi at temperature 1 of each id, finish reason).

        ``mm_inputs`` (from ``render_inputs``) go into the first forward with the prompt; later
        steps feed one token each with the cache (the model keeps the M-RoPE offset).
        """
        import torch

        device = next(self.model.parameters()).device
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        out_ids: list[int] = []
        logprobs: list[float] = []
        finish = "length"
        past = None
        step_input = ids
        extra = self._mm_kwargs(mm_inputs)
        self._reset_positions()
        with torch.no_grad():
            for _ in range(max_new_tokens):
                out = self.model(input_ids=step_input, past_key_values=past, use_cache=True, logits_to_keep=1,
                                 **extra)
                extra = {}
                past = out.past_key_values
                logits = out.logits[0, -1].float()
                logp = torch.log_softmax(logits, dim=-1)
                probs = torch.softmax(logits / max(temperature, 1e-6), dim=-1) if temperature > 0 else None
                if probs is None:
                    token = int(torch.argmax(logits))
                else:
                    if top_p < 1.0:
                        sorted_p, order = torch.sort(probs, descending=True)
                        keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
                        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
                        probs = probs / probs.sum()
                    token = int(torch.multinomial(probs.cpu(), 1, generator=self.generator))
                out_ids.append(token)
                logprobs.append(float(logp[token]))
                if token in self.stop_ids:
                    finish = "stop"
                    break
                step_input = torch.tensor([[token]], dtype=torch.long, device=device)
        return out_ids, logprobs, finish

    def score(self, prompt_ids: list[int], text: str, mm_inputs: dict[str, Any] | None = None
              ) -> tuple[list[int], list[float], str]:
        """Token ids of ``text`` + ``<|im_end|>`` and their log-probabilities under the served model."""
        import torch

        from captain_training.rl.logprobs import completion_logprobs

        ids = [int(t) for t in self.tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]]
        self._reset_positions()
        with torch.no_grad():
            logp = completion_logprobs(self.model, prompt_ids, ids, mm_inputs=mm_inputs or None)
        return ids, [float(x) for x in logp.tolist()], "stop"

    def choose(self, prompt_ids: list[int], texts: list[str], mm_inputs: dict[str, Any] | None = None
               ) -> tuple[list[int], list[float], str, int]:
        """Score every candidate text, sample one in proportion to its likelihood under the model.

        Returns (ids, per-token log pi of the chosen text, finish reason, chosen index); the
        choice probabilities are kept in ``last_candidate_probs``.
        """
        import torch

        if not texts or not all(isinstance(t, str) and t for t in texts):
            raise RLError("candidates must be a non-empty list of non-empty completion texts")
        scored = [self.score(prompt_ids, t, mm_inputs) for t in texts]
        totals = torch.tensor([sum(lps) for _, lps, _ in scored], dtype=torch.float64)
        probs = torch.softmax(totals, dim=0)
        self.last_candidate_probs = [float(x) for x in probs.tolist()]
        k = int(torch.multinomial(probs.float(), 1, generator=self.generator))
        ids, lps, finish = scored[k]
        return ids, lps, finish, k

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion (see the module docstring for the fields)."""

        cfg = self.config
        model = body.get("model")
        if model not in (None, cfg.served_model_name):
            raise RLError(f"unknown model {model!r}; this endpoint serves {cfg.served_model_name!r}")
        temperature = float(body.get("temperature", 1.0))
        top_p = float(body.get("top_p", 1.0))
        if not 0.0 < top_p <= 1.0 or temperature < 0.0:
            raise RLError(f"temperature must be >= 0 and top_p in (0, 1], got {temperature} and {top_p}")
        max_new = min(int(body.get("max_tokens") or cfg.max_new_tokens), cfg.max_new_tokens)
        with self.lock:
            t0 = time.perf_counter()
            prompt_ids, mm_inputs = self.render_inputs(body)
            if len(prompt_ids) > cfg.max_prompt_tokens:
                raise RLError(f"prompt has {len(prompt_ids)} tokens, more than max_prompt_tokens "
                              f"({cfg.max_prompt_tokens})")
            candidate_index, candidate_probs = None, None
            candidates = body.get("candidates")
            if candidates is not None:
                if not isinstance(candidates, list):
                    raise RLError("candidates must be a list of completion texts")
                completion_ids, logprobs, finish, candidate_index = self.choose(prompt_ids, candidates, mm_inputs)
            elif cfg.scripted_completions:
                completion_ids, logprobs, finish, candidate_index = self.choose(
                    prompt_ids, list(cfg.scripted_completions), mm_inputs)
            else:
                completion_ids, logprobs, finish = self.sample(prompt_ids, max_new, temperature, top_p, mm_inputs)
            if candidate_index is not None:
                candidate_probs = self.last_candidate_probs
            version = self.policy_version
            self.requests_served += 1
            self.tokens_generated += len(completion_ids)
            elapsed = time.perf_counter() - t0
        text_ids = [t for t in completion_ids if t not in self.stop_ids]
        text = self.tokenizer.decode(text_ids, skip_special_tokens=False)
        parsed = parse_generation(text)
        if parsed["tool_calls"] and finish == "stop":
            finish = "tool_calls"
        message = {"role": "assistant", "content": parsed["content"],
                   "reasoning_content": parsed["reasoning_content"]}
        if parsed["tool_calls"]:
            message["tool_calls"] = parsed["tool_calls"]
        choice = {"index": 0, "message": message, "finish_reason": finish, "token_ids": completion_ids,
                  "logprobs": {"content": [{"token": self.tokenizer.decode([t], skip_special_tokens=False),
                                            "logprob": lp} for t, lp in zip(completion_ids, logprobs,
                                                                             strict=True)]}}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": cfg.served_model_name,
            "policy_version": version,
            "prompt_token_ids": prompt_ids,
            "prompt_images": len(mm_inputs.get("image_grid_thw", ())),
            "candidate_index": candidate_index,
            "candidate_probs": candidate_probs,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion_ids),
                      "total_tokens": len(prompt_ids) + len(completion_ids)},
            "timing": {"generate_s": round(elapsed, 4)},
        }
