"""Generators that write an answer from a rendered prompt, chosen by RAGD_GENERATOR:

- `extractive` (the default; see `extractive`): no model, offline, deterministic. `make_generator` returns None.
- `openai:MODEL`: any OpenAI-compatible chat completions API at RAGD_LLM_BASE_URL (OpenAI, vLLM, Ollama, a
  llama.cpp server, Together).
- `anthropic:MODEL`: the Anthropic Messages API.
- `gguf:PATH`: a GGUF file the operator supplies, run in process by llama.cpp (`xllamacpp`, the optional extra
  `pip install 'ragd[local]'`).

All run at temperature 0 with a fixed seed where the service takes one, and return the text with its token
counts. Any failure after the retries raises `LLMUnavailable`; a bad spec or a missing file is a `ConfigError`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError, LLMUnavailable
from ..net import post_json
from .prompt import Prompt

if TYPE_CHECKING:
    from ..config import Settings

OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None


class Generator(Protocol):
    provider: str  # openai, anthropic, gguf
    model: str

    @property
    def name(self) -> str: ...  # provider:model, as configured

    @property
    def version(self) -> str: ...  # what reproduces its output (for gguf, the file's digest)

    def complete(self, prompt: Prompt) -> Completion: ...


@dataclass(frozen=True)
class Sampling:
    max_tokens: int = 1024
    seed: int = 0
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 1.0


class _Api:
    provider = ""

    def __init__(self, model: str, url: str, headers: dict[str, str], sampling: Sampling):
        self.model, self.url, self._headers, self.sampling = model, url, headers, sampling

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def version(self) -> str:
        return self.name

    def _post(self, payload: dict[str, Any]) -> Any:
        s = self.sampling
        return post_json(self.url, payload, headers=self._headers, timeout_s=s.timeout_s, retries=s.retries,
                         backoff_s=s.backoff_s, what=f"generator {self.name} at {self.url}", error=LLMUnavailable)

    def _unreadable(self, exc: Exception) -> LLMUnavailable:
        return LLMUnavailable(f"generator {self.name} sent an unreadable answer ({type(exc).__name__}: {exc})")


class OpenAIChat(_Api):
    """POST {base}/chat/completions: system and user messages, temperature 0, a seed."""

    provider = "openai"

    def __init__(self, model: str, base_url: str, api_key: str | None, sampling: Sampling):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(model, base_url.rstrip("/") + "/chat/completions", headers, sampling)

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {"model": self.model, "temperature": 0, "seed": self.sampling.seed,
                "max_tokens": self.sampling.max_tokens,
                "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]}

    def complete(self, prompt: Prompt) -> Completion:
        return _chat_completion(self._post(self.payload(prompt)), self._unreadable)


def _chat_completion(body: Any, unreadable: Any) -> Completion:
    """A Completion from an OpenAI-shaped chat completion body."""
    try:
        choice = body["choices"][0]
        usage = body.get("usage") or {}
        return Completion(text=str(choice["message"]["content"] or ""), prompt_tokens=usage.get("prompt_tokens"),
                          completion_tokens=usage.get("completion_tokens"), finish_reason=choice.get("finish_reason"))
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise unreadable(exc) from exc


class AnthropicMessages(_Api):
    """POST {base}/messages: the system prompt apart, one user message, temperature 0 (no seed in this API)."""

    provider = "anthropic"

    def __init__(self, model: str, base_url: str, api_key: str | None, sampling: Sampling):
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": api_key} if api_key else {})}
        super().__init__(model, base_url.rstrip("/") + "/messages", headers, sampling)

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        return {"model": self.model, "temperature": 0, "max_tokens": self.sampling.max_tokens,
                "system": prompt.system, "messages": [{"role": "user", "content": prompt.user}]}

    def complete(self, prompt: Prompt) -> Completion:
        body = self._post(self.payload(prompt))
        try:
            text = "".join(part["text"] for part in body["content"] if part.get("type") == "text")
            usage = body.get("usage") or {}
            return Completion(text=text, prompt_tokens=usage.get("input_tokens"),
                              completion_tokens=usage.get("output_tokens"), finish_reason=body.get("stop_reason"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise self._unreadable(exc) from exc


class Gguf:
    """A GGUF model run in process by llama.cpp's server core (xllamacpp): one request at a time, no prompt cache
    (a reused cache may change the numbers, and with them the words)."""

    provider = "gguf"

    def __init__(self, path: Path, sampling: Sampling, *, context_tokens: int = 8192, threads: int = 0):
        if importlib.util.find_spec("xllamacpp") is None:
            raise ConfigError("RAGD_GENERATOR=gguf:… needs the optional extra: pip install 'ragd[local]'")
        if not path.is_file():
            raise ConfigError(f"RAGD_GENERATOR: no GGUF file at {path}")
        import xllamacpp

        self.path, self.sampling = path, sampling
        self.model = str(path)
        self._digest: str | None = None
        self._lock = threading.Lock()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = context_tokens
        params.n_predict = sampling.max_tokens
        params.n_parallel = 1
        params.verbosity = -1  # llama.cpp logs nothing to stderr; its failures come back as exceptions or errors
        params.sampling.temp = 0.0
        params.sampling.seed = sampling.seed
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or (os.cpu_count() or 1)
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:  # llama.cpp reports a bad file as a RuntimeError of its own
            raise ConfigError(f"RAGD_GENERATOR: {path} is not a GGUF model llama.cpp can load ({exc})") from exc

    @property
    def name(self) -> str:
        return f"gguf:{self.path.name}"

    @property
    def version(self) -> str:
        if self._digest is None:
            digest = hashlib.sha256()
            with self.path.open("rb") as f:
                while block := f.read(1 << 20):
                    digest.update(block)
            self._digest = digest.hexdigest()[:16]
        return f"{self.name}@{self._digest}"

    def complete(self, prompt: Prompt) -> Completion:
        request = {"messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
                   "max_tokens": self.sampling.max_tokens, "temperature": 0, "seed": self.sampling.seed,
                   "cache_prompt": False}
        try:
            with self._lock:
                body = self._server.handle_chat_completions(request)
        except Exception as exc:  # the binding raises what llama.cpp throws
            raise LLMUnavailable(f"generator {self.name} failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(body, dict) and "error" in body:
            raise LLMUnavailable(f"generator {self.name} failed: {body['error']}")
        return _chat_completion(body, lambda exc: LLMUnavailable(f"generator {self.name}: unreadable answer {exc}"))


def make_generator(spec: str, settings: Settings) -> Generator | None:
    """The generator of a RAGD_GENERATOR spec; None for `extractive`."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "extractive" and not rest:
        return None
    sampling = Sampling(max_tokens=settings.llm_max_tokens, seed=settings.llm_seed, timeout_s=settings.llm_timeout_s,
                        retries=settings.llm_max_retries)
    if kind == "openai" and rest:
        key = settings.llm_api_key or os.environ.get("OPENAI_API_KEY")
        return OpenAIChat(rest, settings.llm_base_url or OPENAI_URL, key, sampling)
    if kind == "anthropic" and rest:
        key = settings.llm_api_key or os.environ.get("ANTHROPIC_API_KEY")
        return AnthropicMessages(rest, settings.llm_base_url or ANTHROPIC_URL, key, sampling)
    if kind == "gguf" and rest:
        return Gguf(Path(rest).expanduser(), sampling, context_tokens=settings.llm_context_tokens,
                    threads=settings.onnx_threads)
    raise ConfigError(f"RAGD_GENERATOR={spec!r}: expected extractive, openai:MODEL, anthropic:MODEL or gguf:PATH")
