"""A policy behind any OpenAI-compatible chat-completions endpoint (vLLM serving
Qwen3.5-4B or a CaPtain checkpoint, or any other server speaking the format).

Each request sends the rendered history with the single ``python`` tool, thinking on
(``chat_template_kwargs.enable_thinking``), the configured temperature and top-p, and
asks for token ids and logprobs when configured (vLLM returns ``prompt_token_ids`` and
``choices[0].token_ids`` for ``return_token_ids``). Images go as base64 data URLs.

Connection errors, timeouts and 408/429/5xx answers are retried with exponential
backoff; when the retries run out the client raises ``PolicyUnavailableError`` (an
infrastructure failure, not a policy failure). Other 4xx answers raise ``PolicyError``.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from captain_harness.core.episode.errors import PolicyError, PolicyUnavailableError
from captain_harness.core.episode.policy.base import (
    PolicyClient,
    PolicyReply,
    PolicyRequest,
    ToolCall,
    new_call_id,
    parse_tool_arguments,
)

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_XML_CALL = re.compile(r"<tool_call>\s*<function=([\w.-]+)>(.*?)</function>\s*</tool_call>", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>\n?(.*?)\n?</parameter>", re.S)
_JSON_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


@dataclass
class OpenAIConfig:
    """Settings of the chat-completions client.

    Attributes:
        base_url: the server's API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model name.
        api_key: bearer token; None reads ``api_key_env`` from the environment (may be unset).
        temperature / top_p: sampling (paper: 1.0 and 1.0).
        max_tokens: completion limit per request (paper: 4,096).
        enable_thinking: ask the chat template for the thinking channel.
        request_timeout_s: time limit of one HTTP request, s.
        max_retries: retries after the first attempt for retryable failures.
        backoff_s / backoff_max_s: first retry delay and its cap (doubling), s.
        return_token_ids: ask for prompt and completion token ids.
        logprobs: ask for the completion's per-token logprobs.
        tool_images: ``"inline"`` puts images in the tool message's content parts;
            ``"user"`` sends tool text only and the images in a following user message.
        extra_body: further fields merged into every request body.
    """

    base_url: str
    model: str
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 4096
    enable_thinking: bool = True
    request_timeout_s: float = 600.0
    max_retries: int = 5
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    return_token_ids: bool = False
    logprobs: bool = False
    tool_images: str = "inline"
    extra_body: dict[str, Any] = field(default_factory=dict)


class OpenAIChatPolicy(PolicyClient):
    """The chat-completions policy. See the module docstring."""

    name = "openai"

    def __init__(self, config: OpenAIConfig) -> None:
        if config.tool_images not in ("inline", "user"):
            raise PolicyError(f"tool_images={config.tool_images!r}; choose 'inline' or 'user'")
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._urls: OrderedDict[str, bytes] = OrderedDict()  # image path -> data URL (files never change)
        self._token = f"@@captain-{uuid.uuid4().hex[:12]}-image:"
        self._token_re = re.compile(re.escape(self._token.encode()) + rb"(\d+)@@")
        self._images: list[bytes] = []  # data URLs of the request being built
        self.last_request_body: dict[str, Any] | None = None
        self.attempts = 0

    # ------------------------------------------------------------------ request
    def data_url(self, root: Path, path: str) -> bytes:
        """The base64 data URL of an image file (cached: image files never change)."""
        key = str(root / path)
        url = self._urls.get(key)
        if url is None:
            with open(key, "rb") as f:
                data = f.read()
            mime = _MIME.get(Path(path).suffix.lower(), "image/png")
            url = f"data:{mime};base64,".encode() + base64.b64encode(data)
            self._urls[key] = url
            while len(self._urls) > 128:
                self._urls.popitem(last=False)
        else:
            self._urls.move_to_end(key)
        return url

    def _parts(self, content: Any, root: Path) -> Any:
        if not isinstance(content, list):
            return content
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image":
                # A placeholder: the data URL's bytes are spliced into the encoded body, so the
                # large base64 strings are never re-encoded as JSON.
                self._images.append(self.data_url(root, str(part["image"])))
                placeholder = f"{self._token}{len(self._images) - 1}@@"
                out.append({"type": "image_url", "image_url": {"url": placeholder}})
            else:
                out.append(part)
        return out

    def encode_body(self, body: dict[str, Any]) -> bytes:
        """The JSON bytes of a body built by ``request_body`` (placeholders replaced by data URLs)."""
        raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
        pieces = self._token_re.split(raw)
        for i in range(1, len(pieces), 2):
            pieces[i] = self._images[int(pieces[i])]
        return b"".join(pieces)

    def wire_messages(self, messages: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
        """Row-format messages -> chat-completions messages (data URLs, JSON-string arguments)."""
        wire: list[dict[str, Any]] = []
        pending_images: list[dict[str, Any]] = []
        for m in messages:
            role = m.get("role")
            if pending_images and role != "tool":
                wire.append({"role": "user", "content": pending_images})
                pending_images = []
            if role == "assistant":
                w: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
                if m.get("reasoning_content"):
                    w["reasoning_content"] = m["reasoning_content"]
                if m.get("tool_calls"):
                    w["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {
                                "name": c["function"]["name"],
                                "arguments": c["function"]["arguments"]
                                if isinstance(c["function"]["arguments"], str)
                                else json.dumps(c["function"]["arguments"], ensure_ascii=False),
                            },
                        }
                        for c in m["tool_calls"]
                    ]
                wire.append(w)
            elif role == "tool" and self.config.tool_images == "user" and isinstance(m.get("content"), list):
                texts = [p.get("text", "") for p in m["content"] if p.get("type") == "text"]
                wire.append(
                    {"role": "tool", "tool_call_id": m.get("tool_call_id"), "content": "\n".join(texts)}
                )
                images = [p for p in m["content"] if p.get("type") == "image"]
                if images:
                    pending_images += self._parts(images, root)
            else:
                w = {k: v for k, v in m.items() if k != "content"}
                w["content"] = self._parts(m.get("content"), root)
                wire.append(w)
        if pending_images:
            wire.append({"role": "user", "content": pending_images})
        return wire

    def request_body(self, request: PolicyRequest) -> dict[str, Any]:
        """The body of one chat-completions request (images as placeholders; see ``encode_body``)."""
        c = self.config
        self._images = []
        body: dict[str, Any] = {
            "model": c.model,
            "messages": self.wire_messages(request.messages, request.image_root),
            "tools": request.tools,
            "tool_choice": "auto",
            "temperature": c.temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_tokens,
            "chat_template_kwargs": {"enable_thinking": c.enable_thinking},
        }
        if c.return_token_ids:
            body["return_token_ids"] = True
        if c.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 0
        body.update(c.extra_body)
        return body

    # ---------------------------------------------------------------------- act
    def act(self, request: PolicyRequest) -> PolicyReply:
        t0 = time.perf_counter()
        body = self.request_body(request)
        self.last_request_body = body
        payload = self.encode_body(body)
        t1 = time.perf_counter()
        data = self._post(payload)
        t2 = time.perf_counter()
        reply = parse_completion(data)
        reply.client_overhead_s = (t1 - t0) + (time.perf_counter() - t2)
        return reply

    def _post(self, payload: bytes) -> dict[str, Any]:
        c = self.config
        key = c.api_key if c.api_key is not None else os.environ.get(c.api_key_env)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        delay = c.backoff_s
        last_error = ""
        for attempt in range(c.max_retries + 1):
            self.attempts += 1
            try:
                req = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=c.request_timeout_s) as resp:
                    raw = resp.read()
                try:
                    data = json.loads(raw.decode("utf-8"))
                except RecursionError as exc:
                    raise PolicyError(
                        "the policy server's answer is malformed: its JSON nests too deeply to be read"
                    ) from exc
                except (UnicodeDecodeError, ValueError) as exc:
                    last_error = f"the server answered with invalid JSON ({exc})"
                else:
                    if isinstance(data, dict) and "choices" in data and data.get("choices") is not None:
                        return data
                    last_error = f"the server answered without choices: {str(data)[:200]}"
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:500].decode("utf-8", "replace") if exc.fp else ""
                if exc.code not in _RETRY_STATUS:
                    raise PolicyError(
                        f"the policy server rejected the request (HTTP {exc.code}): {detail}"
                    ) from exc
                last_error = f"HTTP {exc.code}: {detail[:200]}"
            except (
                urllib.error.URLError,
                http.client.HTTPException,
                ConnectionError,
                TimeoutError,
                OSError,
            ) as exc:
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < c.max_retries:
                time.sleep(delay)
                delay = min(c.backoff_max_s, delay * 2)
        raise PolicyUnavailableError(
            f"the policy server at {self.url} could not be reached after "
            f"{c.max_retries + 1} attempts (last error: {last_error})"
        )


def _split_think(content: str) -> tuple[str, str]:
    """(reasoning, visible) of a content that carries its own ``<think>...</think>`` block."""
    if "</think>" not in content:
        return "", content
    head, _, tail = content.partition("</think>")
    return head.replace("<think>", "").strip(), tail.lstrip("\n")


def _calls_from_text(content: str) -> tuple[list[ToolCall], str]:
    """Tool calls written in the content (the server's tool parser did not extract them)."""
    calls: list[ToolCall] = []
    for fn, body in _XML_CALL.findall(content):
        params = dict(_XML_PARAM.findall(body))
        code, error = parse_tool_arguments(fn, {"input": params["input"]} if "input" in params else {})
        calls.append(ToolCall(new_call_id(), code, error))
    if not calls:
        for raw in _JSON_CALL.findall(content):
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                calls.append(ToolCall(new_call_id(), "", "Error: a <tool_call> block is not valid JSON."))
                continue
            code, error = parse_tool_arguments(obj.get("name"), obj.get("arguments"))
            calls.append(ToolCall(new_call_id(), code, error))
    if calls:
        content = content[: content.find("<tool_call>")].rstrip()
    return calls, content


def _malformed(what: str) -> PolicyError:
    return PolicyError(f"the policy server's answer is malformed: {what}")


def _text_field(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _malformed(f"{where}.{key} is a {type(value).__name__}, not text")
    return value


def _usage(value: Any) -> dict[str, Any]:
    """``usage`` with its token counts checked (non-negative integers)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(f"usage is a {type(value).__name__}, not an object")
    out: dict[str, Any] = {}
    for key, count in value.items():
        if key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if count is None:
                continue
            if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < 2**53:
                raise _malformed(f"usage.{key} is {str(count)[:40]!r}, not a token count")
            out[key] = count
        elif isinstance(key, str) and isinstance(count, (int, float)) and not isinstance(count, bool):
            out[key] = count  # other numeric fields are kept as reported
    return out


def _int_list(value: Any, where: str) -> list[int] | None:
    if not value:
        return None
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise _malformed(f"{where} is not a list of token ids")
    return list(value)


def parse_completion(data: dict[str, Any]) -> PolicyReply:
    """A chat-completions response -> ``PolicyReply``.

    Raises:
        PolicyError: the answer is malformed (``choices`` not a list of objects, a message
            that is not an object, text fields that are not text, usage counts that are not
            integers, nesting too deep); the message says which part.
    """
    try:
        return _parse_completion(data)
    except PolicyError:
        raise
    except RecursionError as exc:
        raise _malformed("it nests too deeply") from exc
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
        raise _malformed(f"{type(exc).__name__}: {str(exc)[:200]}") from exc


def _parse_completion(data: dict[str, Any]) -> PolicyReply:
    if not isinstance(data, dict):
        raise _malformed(f"the body is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _malformed(f"choices is a {type(choices).__name__}, not a non-empty list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _malformed(f"choices[0] is a {type(choice).__name__}, not an object")
    msg = choice.get("message")
    msg = {} if msg is None else msg
    if not isinstance(msg, dict):
        raise _malformed(f"choices[0].message is a {type(msg).__name__}, not an object")
    content = _text_field(msg, "content", "message")
    reasoning = _text_field(msg, "reasoning_content", "message") or _text_field(msg, "reasoning", "message")
    if not reasoning:
        reasoning, content = _split_think(content)
    calls: list[ToolCall] = []
    tool_calls = msg.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        raise _malformed(f"message.tool_calls is a {type(tool_calls).__name__}, not a list")
    for c in tool_calls:
        if not isinstance(c, dict):
            raise _malformed(f"a tool call is a {type(c).__name__}, not an object")
        fn = c.get("function") or {}
        if not isinstance(fn, dict):
            raise _malformed(f"a tool call's function is a {type(fn).__name__}, not an object")
        code, error = parse_tool_arguments(fn.get("name"), fn.get("arguments"))
        call_id = c.get("id")
        calls.append(ToolCall(call_id if isinstance(call_id, str) and call_id else new_call_id(), code, error))
    if not calls and "<tool_call>" in content:
        calls, content = _calls_from_text(content)
    logprobs = None
    lp = choice.get("logprobs")
    if isinstance(lp, dict) and isinstance(lp.get("content"), list):
        if not all(isinstance(t, dict) for t in lp["content"]):
            raise _malformed("logprobs.content is not a list of objects")
        logprobs = [float(t.get("logprob", 0.0)) for t in lp["content"]]
    prompt_ids = _int_list(data.get("prompt_token_ids") or choice.get("prompt_token_ids"), "prompt_token_ids")
    completion_ids = _int_list(choice.get("token_ids"), "token_ids")
    finish_reason = choice.get("finish_reason")
    model = data.get("model")
    return PolicyReply(
        content=content.strip(),
        reasoning=reasoning.strip(),
        tool_calls=calls,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        usage=_usage(data.get("usage")),
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        logprobs=logprobs,
        model=model if isinstance(model, str) else None,
    )
